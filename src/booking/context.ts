import type { Repository } from '../store';
import type { Caller } from '../common/identity';
import { ownerForWrite } from '../server-lib/owner';
import type { Origin } from './outbox';
import { bookingTables, type BookingTables } from './tables';

/**
 * What a booking step works with: a repository bound to the booking's transaction, writing with
 * origin `booking` (every other part's interceptors still see those writes).
 */
export interface BookingContext {
  repo: Repository;
  /** The booking's own tables, on the same transaction. */
  tables: BookingTables;
  /**
   * Who acts on the booking; undefined: the repository itself (imports, jobs without a
   * requester, the booking's own follow-up writes). Also the scope its reads see (server-lib/owner.ts).
   */
  caller: Pick<Caller, 'institution' | 'isOwner' | 'patient'> | undefined;
  now: Date;
}

/** The context of a booking step for `caller` on `repo` (bound to the caller's transaction); no institution: the repository itself. */
export function bookingContext(repo: Repository, caller?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): BookingContext {
  return { repo: repo.actingAs('booking', caller), tables: bookingTables(repo.db), caller: caller?.institution ? caller : undefined, now: repo.now() };
}

/** The repository itself or one of its owners: may confirm, decline and manage calendars. */
export const actsForRepository = (caller: Pick<Caller, 'isOwner'> | undefined): boolean => !caller || caller.isOwner;

/** Owner of a resource of `type` the booking creates. */
export const ownerOf = (caller: Pick<Caller, 'institution' | 'isOwner'> | undefined, type: string): string | null => ownerForWrite(type, caller);
export const originOf = (caller: Pick<Caller, 'isOwner'> | undefined): Origin => (actsForRepository(caller) ? 'repository' : 'requestor');
