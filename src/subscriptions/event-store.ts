import type { Db } from '../store';

/** One numbered event of one subscription (`subscription_event`). */
export interface SubscriptionEvent {
  subscriptionId: string;
  eventNumber: number;
  topic: string;
  focusType: string;
  focusId: string;
  focusVersion: number;
  deleted: boolean;
  occurredAt: Date;
}

interface Row {
  subscription_id: string;
  event_number: string | number;
  topic: string;
  focus_type: string;
  focus_id: string;
  focus_version: number;
  deleted: boolean;
  occurred_at: Date | string;
}

function toEvent(r: Row): SubscriptionEvent {
  return {
    subscriptionId: r.subscription_id,
    eventNumber: Number(r.event_number),
    topic: r.topic,
    focusType: r.focus_type,
    focusId: r.focus_id,
    focusVersion: r.focus_version,
    deleted: r.deleted,
    occurredAt: new Date(r.occurred_at),
  };
}

/** Events numbered `from`..`to` (inclusive), oldest first, at most `limit`. */
export async function eventsBetween(db: Db, subscriptionId: string, from: number, to: number, limit: number): Promise<SubscriptionEvent[]> {
  const { rows } = await db.query<Row>(
    `SELECT subscription_id, event_number, topic, focus_type, focus_id, focus_version, deleted, occurred_at
       FROM subscription_event WHERE subscription_id = $1 AND event_number BETWEEN $2 AND $3
      ORDER BY event_number LIMIT $4`,
    [subscriptionId, from, to, limit],
  );
  return rows.map(toEvent);
}

/**
 * A subquery answering, as a JSON array oldest first, the events of the subscription row `c`
 * (a `subscription_channel` row or a CTE over it) that its next notification carries: those
 * above the delivered mark, at most `max_count` (1 when unset); null when it is not `active`.
 * Read back with `eventsFromJson`.
 */
export function nextEventsSql(c: string): string {
  return `CASE WHEN ${c}.status = 'active' AND ${c}.delivered_through < ${c}.events_since_start THEN
    (SELECT coalesce(json_agg(json_build_object('subscription_id', e.subscription_id, 'event_number', e.event_number, 'topic', e.topic,
              'focus_type', e.focus_type, 'focus_id', e.focus_id, 'focus_version', e.focus_version, 'deleted', e.deleted,
              'occurred_at', e.occurred_at) ORDER BY e.event_number), '[]')
       FROM subscription_event e
      WHERE e.subscription_id = ${c}.id
        AND e.event_number BETWEEN ${c}.delivered_through + 1 AND least(${c}.events_since_start, ${c}.delivered_through + coalesce(${c}.max_count, 1)))
  END`;
}

/** The events `nextEventsSql` answered (the driver may hand JSON over parsed or as text). */
export function eventsFromJson(json: unknown): SubscriptionEvent[] | undefined {
  if (json === null || json === undefined) return undefined;
  const rows = (typeof json === 'string' ? JSON.parse(json) : json) as Row[];
  return rows.map(toEvent);
}

export interface NewEvent {
  outboxId: number;
  topic: string;
  focusType: string;
  focusId: string;
  focusVersion: number;
  deleted: boolean;
  occurredAt: Date;
}

/**
 * Numbers one event for each of `subscriptionIds` (the next `events-since-subscription-start`)
 * and stores it, in the caller's transaction. Returns the subscriptions that got a new number.
 */
export async function numberEvent(db: Db, subscriptionIds: string[], event: NewEvent): Promise<string[]> {
  if (subscriptionIds.length === 0) return [];
  // Row locks in id order: two replicas numbering events for the same subscriptions never deadlock.
  await db.query('SELECT id FROM subscription_channel WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE', [subscriptionIds]);
  const { rows } = await db.query<{ id: string }>(
    `WITH fresh AS (
       SELECT s FROM unnest($1::text[]) s
        WHERE NOT EXISTS (SELECT 1 FROM subscription_event e WHERE e.subscription_id = s AND e.outbox_id = $2)
     ), numbered AS (
       UPDATE subscription_channel c SET events_since_start = c.events_since_start + 1
         FROM fresh WHERE c.id = fresh.s
       RETURNING c.id, c.events_since_start
     )
     INSERT INTO subscription_event (subscription_id, event_number, topic, focus_type, focus_id, focus_version, deleted, occurred_at, outbox_id)
     SELECT id, events_since_start, $3, $4, $5, $6, $7, $8, $2 FROM numbered
     RETURNING subscription_id AS id`,
    [subscriptionIds, event.outboxId, event.topic, event.focusType, event.focusId, event.focusVersion, event.deleted, event.occurredAt.toISOString()],
  );
  return rows.map((r) => r.id);
}

/**
 * Drops events older than `before` and those of deleted subscriptions: `$events` answers from
 * what is kept (the backport leaves retention to the server).
 */
export async function purgeEvents(db: Db, before: Date): Promise<number> {
  const old = await db.query('DELETE FROM subscription_event WHERE occurred_at < $1', [before.toISOString()]);
  const orphaned = await db.query('DELETE FROM subscription_event e USING subscription_channel c WHERE c.id = e.subscription_id AND c.deleted');
  return old.rowCount + orphaned.rowCount;
}
