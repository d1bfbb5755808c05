import type { Db } from '../store';
import { eventsFromJson, nextEventsSql, type SubscriptionEvent } from './event-store';
import type { SubscriptionStatusCode } from './backport';

/** A row of `subscription_channel` (migrations/300_subscriptions.sql). */
export interface Channel {
  id: string;
  owner: string | null;
  status: SubscriptionStatusCode;
  topic: string;
  filter: string | null;
  endpoint: string | null;
  payload: string | null;
  heartbeatS: number | null;
  timeoutS: number | null;
  maxCount: number | null;
  headersSealed: string | null;
  eventsSinceStart: number;
  deliveredThrough: number;
  failures: number;
  errorCode: string | null;
  lastSuccessAt: Date | null;
  /** versionId of the Subscription resource: server status changes are made against it. */
  version: string | undefined;
}

interface Row {
  id: string;
  owner: string | null;
  status: SubscriptionStatusCode;
  topic: string;
  filter: string | null;
  endpoint: string | null;
  payload: string | null;
  heartbeat_s: number | null;
  timeout_s: number | null;
  max_count: number | null;
  headers_sealed: string | null;
  events_since_start: string | number;
  delivered_through: string | number;
  failures: number;
  error_code: string | null;
  last_success_at: Date | string | null;
  version_id: number | null;
}

const COLUMNS = `id, owner, status, topic, filter, endpoint, payload, heartbeat_s, timeout_s, max_count, headers_sealed, events_since_start,
  delivered_through, failures, error_code, last_success_at,
  (SELECT r.version_id FROM resource r WHERE r.resource_type = 'Subscription' AND r.id = subscription_channel.id AND NOT r.deleted) AS version_id`;

function toChannel(r: Row): Channel {
  return {
    id: r.id,
    owner: r.owner,
    status: r.status,
    topic: r.topic,
    filter: r.filter,
    endpoint: r.endpoint,
    payload: r.payload,
    heartbeatS: r.heartbeat_s,
    timeoutS: r.timeout_s,
    maxCount: r.max_count,
    headersSealed: r.headers_sealed,
    eventsSinceStart: Number(r.events_since_start),
    deliveredThrough: Number(r.delivered_through),
    failures: r.failures,
    errorCode: r.error_code,
    lastSuccessAt: r.last_success_at === null ? null : new Date(r.last_success_at),
    version: r.version_id === null ? undefined : String(r.version_id),
  };
}

/**
 * Hands the sealed channel headers of the Subscription being written to the mirror trigger
 * (migrations/300_subscriptions.sql), for this transaction only: the resource shows them masked.
 */
export async function stageSealedHeaders(db: Db, sealed: string): Promise<void> {
  await db.query("SELECT set_config('terminus.subscription_headers', $1, true)", [sealed]);
}

export async function readChannel(db: Db, id: string): Promise<Channel | undefined> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM subscription_channel WHERE id = $1 AND NOT deleted`, [id]);
  return rows[0] && toChannel(rows[0]);
}

export async function readChannels(db: Db, ids: string[]): Promise<Channel[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM subscription_channel WHERE id = ANY($1::text[]) AND NOT deleted`, [ids]);
  return rows.map(toChannel);
}

/** Subscriptions an event of `topic` may be numbered for (backport "errors": counted in error too). */
export async function listeningChannels(db: Db, topic: string, at: Date): Promise<Pick<Channel, 'id' | 'owner' | 'filter'>[]> {
  const { rows } = await db.query<{ id: string; owner: string | null; filter: string | null }>(
    `SELECT id, owner, filter FROM subscription_channel
      WHERE topic = $1 AND NOT deleted AND status IN ('requested', 'active', 'error') AND (ends_at IS NULL OR ends_at > $2)
      ORDER BY id`,
    [topic, at.toISOString()],
  );
  return rows;
}

/** Work due at `$1`: a handshake, events above the delivered mark, or a heartbeat; no live lease, no retry pending. */
const DUE = `NOT deleted
        AND (ends_at IS NULL OR ends_at > $1)
        AND (lease_until IS NULL OR lease_until < $1)
        AND (next_attempt_at IS NULL OR next_attempt_at <= $1)
        AND (status = 'requested'
             OR (status = 'active' AND (delivered_through < events_since_start
                 OR (heartbeat_s > 0 AND coalesce(last_success_at, '-infinity') + heartbeat_s * interval '1 second' <= $1))))`;

/**
 * Takes up to `limit` subscriptions with work due for this sender until `until`, each with the
 * events of its next notification (`undefined` unless it is active with events to deliver): one
 * statement; SKIP LOCKED and the lease keep other replicas off them meanwhile.
 */
export async function claimDueChannels(db: Db, now: Date, until: Date, limit: number): Promise<{ channel: Channel; events?: SubscriptionEvent[] }[]> {
  const { rows } = await db.query<Row & { events: unknown }>(
    `WITH claimed AS (
       UPDATE subscription_channel SET lease_until = $2
        WHERE id IN (SELECT id FROM subscription_channel WHERE ${DUE} ORDER BY next_attempt_at NULLS FIRST, id LIMIT $3 FOR UPDATE SKIP LOCKED)
        RETURNING ${COLUMNS}
     )
     SELECT claimed.*, ${nextEventsSql('claimed')} AS events FROM claimed`,
    [now.toISOString(), until.toISOString(), limit],
  );
  return rows.map((r) => ({ channel: toChannel(r), events: eventsFromJson(r.events) }));
}

/** Subscriptions past their `end` that are not off yet, with the resource version to turn them off against. */
export async function endedChannels(db: Db, now: Date): Promise<{ id: string; version: string }[]> {
  const { rows } = await db.query<{ id: string; version_id: number }>(
    `SELECT c.id, r.version_id FROM subscription_channel c JOIN resource r ON r.resource_type = 'Subscription' AND r.id = c.id
      WHERE NOT c.deleted AND c.status <> 'off' AND c.ends_at <= $1 LIMIT 100`,
    [now.toISOString()],
  );
  return rows.map((r) => ({ id: r.id, version: String(r.version_id) }));
}

/** Extends the claims still held, many in one statement (a released one stays released). */
export async function renewChannelLeases(db: Db, ids: string[], until: Date): Promise<void> {
  if (ids.length === 0) return;
  await db.query('UPDATE subscription_channel SET lease_until = $2 WHERE id = ANY($1::text[]) AND lease_until IS NOT NULL', [ids, until.toISOString()]);
}

export async function releaseChannels(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query('UPDATE subscription_channel SET lease_until = NULL WHERE id = ANY($1::text[])', [ids]);
}

/** An endpoint acknowledged a notification of subscription `id` at `at`. */
export interface Success {
  id: string;
  at: Date;
  /** The last event number the notification carried; none for handshakes and heartbeats. */
  deliveredThrough?: number;
  /** End the lease once every numbered event is delivered (saves a round trip). */
  release: boolean;
}

/**
 * Acknowledged notifications, many subscriptions in one statement: marks delivered events,
 * resets the failure count, ends the lease where asked and nothing is left. Answers each
 * subscription as it is now when its lease is still held (work to continue with), else undefined.
 * One row per id (`GroupCommit` keeps repeated ids apart).
 */
export async function recordSuccesses(db: Db, items: Success[]): Promise<(Channel | undefined)[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query<Row & { leased: boolean }>(
    `UPDATE subscription_channel SET failures = 0, next_attempt_at = NULL, error_code = NULL, last_success_at = u.u_at,
            delivered_through = greatest(delivered_through, coalesce(u.u_through, delivered_through)),
            lease_until = CASE WHEN u.u_release AND greatest(delivered_through, coalesce(u.u_through, delivered_through)) >= events_since_start
                               THEN NULL ELSE lease_until END
       FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::boolean[]) AS u(u_id, u_at, u_through, u_release)
      WHERE subscription_channel.id = u.u_id
      RETURNING ${COLUMNS}, lease_until IS NOT NULL AS leased`,
    [items.map((i) => i.id), items.map((i) => i.at.toISOString()), items.map((i) => (i.deliveredThrough === undefined ? null : String(i.deliveredThrough))), items.map((i) => i.release)],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return items.map((i) => {
    const r = byId.get(i.id);
    return r?.leased ? toChannel(r) : undefined;
  });
}

/** An attempt failed: count it and wait until `retryAt`. */
export async function recordFailure(db: Db, id: string, code: string, retryAt: Date): Promise<number> {
  const { rows } = await db.query<{ failures: number }>(
    'UPDATE subscription_channel SET failures = failures + 1, error_code = $2, next_attempt_at = $3 WHERE id = $1 RETURNING failures',
    [id, code, retryAt.toISOString()],
  );
  return rows[0]?.failures ?? 0;
}

export async function setErrorCode(db: Db, id: string, code: string): Promise<void> {
  await db.query('UPDATE subscription_channel SET error_code = $2, next_attempt_at = NULL WHERE id = $1', [id, code]);
}
