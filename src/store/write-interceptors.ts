import type { Resource } from '@medplum/fhirtypes';
import type { Caller } from '../common/identity';
import type { Alongside, Repository } from './repository';

/**
 * Who caused a write. Interceptors apply to every origin unless they say otherwise: the booking
 * rules skip `booking` (the booking's own writes already follow them), the Subscription rules
 * skip `system` (the server's own status changes).
 * - `rest`: a client's REST interaction or transaction entry;
 * - `import`: `terminus import`;
 * - `job`: a client's request run later by the job queue (async `$book`);
 * - `booking`: a write the booking domain makes itself (slots taken or freed, cascades);
 * - `system`: the server's own bookkeeping (a Subscription turned active, error or off).
 */
export type WriteOrigin = 'rest' | 'import' | 'job' | 'booking' | 'system';

/** One write, seen before it is stored, inside its transaction. */
export interface WriteEvent {
  interaction: 'create' | 'update' | 'patch' | 'delete';
  type: string;
  /** The resource about to be stored (absent for delete); an interceptor may amend it. */
  resource?: Resource;
  /** The current version, when there is one and it is not deleted. */
  previous?: Resource;
  origin: WriteOrigin;
  /** Who asks; undefined: the repository itself. */
  writer?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>;
  /** Bound to the write's transaction: extra reads and writes commit or roll back with it. */
  repo: Repository;
}

/** One write as it is stored, inside its transaction: what an observer of every write (the audit trail) records. */
export interface WrittenEvent {
  interaction: 'create' | 'update' | 'patch' | 'delete';
  type: string;
  id: string;
  versionId: number;
  /** The version stored (for delete: the version deleted). */
  resource: Resource;
  origin: WriteOrigin;
  writer?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>;
  /** Bound to the write's transaction. */
  repo: Repository;
}

/**
 * A rule that must hold for every write of some types, whatever the route: booking keeps its
 * reservations in step with Appointments, subscriptions check Subscriptions and wake the
 * delivery loop. Composed once per application (app.ts) and run by the Repository, so no route
 * can forget one. Throwing (an OperationOutcomeError) refuses the write and rolls back.
 */
export interface WriteInterceptor {
  readonly name: string;
  readonly types: readonly string[];
  beforeWrite?(event: WriteEvent): Promise<void>;
  /**
   * Rows of the interceptor's own tables that belong with this version (the audit trail's
   * AuditEvent of the write): written by the write's own statement, as data-modifying CTEs, so
   * they commit or roll back with it and cost no round trip.
   */
  alongWrite?(event: WrittenEvent): Alongside | undefined;
}
