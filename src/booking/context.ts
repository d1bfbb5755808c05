import type { AccessScope, Repository } from '../store';
import { ownerForWrite, type Writer } from '../shared/owner';
import type { Origin } from './outbox';
import { bookingTables, type BookingTables } from './tables';

/** Who acts on the booking. */
export interface Actor {
  /** Telematik-ID of the requesting institution; undefined: the repository itself. */
  institution?: string;
  /** The repository itself or one of its owners: may confirm, decline and manage calendars. */
  isRepository: boolean;
  scope?: AccessScope;
  /** A patient booking for themselves (docs/requirements.md, Patients (authorization code flow)): their insurance number. */
  patient?: string;
}

/**
 * What a booking step works with: a repository bound to the booking's transaction, writing with
 * origin `booking` (every other part's interceptors still see those writes).
 */
export interface BookingContext {
  repo: Repository;
  /** The booking's own tables, on the same transaction. */
  tables: BookingTables;
  actor: Actor;
  now: Date;
}

/** Who asks, as the booking sees it; no writer: the repository itself. */
export function actorOf(writer?: Writer): Actor {
  if (!writer?.institution) return { isRepository: true };
  const patient = writer.patient !== undefined ? { patient: writer.patient } : {};
  return { institution: writer.institution, isRepository: writer.isOwner, scope: { institution: writer.institution, seesAll: writer.isOwner, ...patient }, ...patient };
}

/** The context of a booking step for `writer` on `repo` (bound to the caller's transaction). */
export function bookingContext(repo: Repository, writer?: Writer): BookingContext {
  return { repo: repo.actingAs('booking', writer), tables: bookingTables(repo.db), actor: actorOf(writer), now: repo.now() };
}

/** Owner of a resource of `type` the booking creates. */
export const ownerOf = (actor: Actor, type: string): string | null => ownerForWrite(type, { institution: actor.institution, isOwner: actor.isRepository });
export const originOf = (actor: Actor): Origin => (actor.isRepository ? 'repository' : 'requestor');
