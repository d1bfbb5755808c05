import type { Resource } from '@medplum/fhirtypes';
import type { AccessScope, Repository } from '../store';
import { ownerForWrite } from '../shared/owner';
import type { Origin } from './outbox';

/** Who acts on the booking (CONTRACT section 4). */
export interface Actor {
  /** Telematik-ID of the requesting institution; undefined: the repository itself. */
  institution?: string;
  /** The repository itself or one of its owners: may confirm, decline and manage calendars. */
  isRepository: boolean;
  scope?: AccessScope;
}

/** Lets the FHIR layer run other parts' write hooks for resources the booking writes. */
export type WriteObserver = (write: { interaction: 'create' | 'update'; type: string; resource: Resource; previous?: Resource }) => Promise<void>;

/** What a booking step works with: a repository bound to the booking's transaction. */
export interface BookingContext {
  repo: Repository;
  actor: Actor;
  now: Date;
  observe?: WriteObserver;
}

/** Owner of a resource of `type` the booking creates (CONTRACT section 4). */
export const ownerOf = (actor: Actor, type: string): string | null => ownerForWrite(type, { institution: actor.institution, isOwner: actor.isRepository });
export const originOf = (actor: Actor): Origin => (actor.isRepository ? 'repository' : 'requestor');
