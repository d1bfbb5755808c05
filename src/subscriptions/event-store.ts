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

/** The next notification's events for many subscriptions in one query: `[id, from, to]` each. */
export async function eventsFor(db: Db, windows: [string, number, number][]): Promise<Map<string, SubscriptionEvent[]>> {
  const out = new Map<string, SubscriptionEvent[]>();
  if (windows.length === 0) return out;
  const { rows } = await db.query<Row>(
    `SELECT e.subscription_id, e.event_number, e.topic, e.focus_type, e.focus_id, e.focus_version, e.deleted, e.occurred_at
       FROM subscription_event e
       JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS w(id, lo, hi)
         ON e.subscription_id = w.id AND e.event_number BETWEEN w.lo AND w.hi
      ORDER BY e.subscription_id, e.event_number`,
    [windows.map((w) => w[0]), windows.map((w) => String(w[1])), windows.map((w) => String(w[2]))],
  );
  for (const r of rows) {
    const e = toEvent(r);
    out.set(e.subscriptionId, [...(out.get(e.subscriptionId) ?? []), e]);
  }
  return out;
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
