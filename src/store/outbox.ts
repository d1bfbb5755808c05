import type { Db } from './db';

/**
 * Domain events about a resource version, recorded in the transaction of the change they
 * describe (so an event exists if and only if the change committed), consumed by other parts
 * (subscriptions). Ids grow in allocation order but transactions may commit out of order:
 * consumers claim unprocessed events with SKIP LOCKED and mark them, never a high-water mark.
 */
export interface OutboxEvent {
  /** `<subject>.<what>`, the producer's vocabulary (e.g. `appointment.cancelled`). */
  type: string;
  resourceType: string;
  resourceId: string;
  /** The version the change produced. */
  versionId: number;
  /** Who caused it, in the producer's words (booking: `repository` or `requestor`). */
  origin: string;
  /** The institution the resource belongs to; null: the repository itself. */
  owner: string | null;
  occurredAt: Date;
}

export interface PendingEvent extends OutboxEvent {
  id: string;
}

export async function appendEvent(db: Db, e: OutboxEvent): Promise<void> {
  await db.query('INSERT INTO outbox (event_type, resource_type, resource_id, version_id, origin, owner, occurred_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
    e.type,
    e.resourceType,
    e.resourceId,
    e.versionId,
    e.origin,
    e.owner,
    e.occurredAt.toISOString(),
  ]);
}

/** Up to `limit` unprocessed events in id order, locked for this transaction; other replicas skip them. */
export async function claimPendingEvents(tx: Db, limit: number): Promise<PendingEvent[]> {
  const { rows } = await tx.query<{ id: string; event_type: string; resource_type: string; resource_id: string; version_id: number; origin: string; owner: string | null; occurred_at: Date | string }>(
    `SELECT id, event_type, resource_type, resource_id, version_id, origin, owner, occurred_at FROM outbox
      WHERE processed_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [limit],
  );
  return rows.map((r) => ({
    id: String(r.id),
    type: r.event_type,
    resourceType: r.resource_type,
    resourceId: r.resource_id,
    versionId: Number(r.version_id),
    origin: r.origin,
    owner: r.owner,
    occurredAt: new Date(r.occurred_at),
  }));
}

export async function markProcessed(tx: Db, ids: string[], at: Date): Promise<void> {
  if (ids.length) await tx.query('UPDATE outbox SET processed_at = $2 WHERE id = ANY($1::bigint[])', [ids, at.toISOString()]);
}
