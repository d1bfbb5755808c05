import type { Db } from '../store';
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
 * Takes up to `limit` subscriptions with work due for this sender until `until` (one statement;
 * SKIP LOCKED and the lease keep other replicas off them meanwhile).
 */
export async function claimDueChannels(db: Db, now: Date, until: Date, limit: number): Promise<Channel[]> {
  const { rows } = await db.query<Row>(
    `UPDATE subscription_channel SET lease_until = $2
      WHERE id IN (SELECT id FROM subscription_channel WHERE ${DUE} ORDER BY next_attempt_at NULLS FIRST, id LIMIT $3 FOR UPDATE SKIP LOCKED)
      RETURNING ${COLUMNS}`,
    [now.toISOString(), until.toISOString(), limit],
  );
  return rows.map(toChannel);
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

/** Extends a claim still held (a released one stays released). */
export async function renewChannelLease(db: Db, id: string, until: Date): Promise<void> {
  await db.query('UPDATE subscription_channel SET lease_until = $2 WHERE id = $1 AND lease_until IS NOT NULL', [id, until.toISOString()]);
}

export async function releaseChannel(db: Db, id: string): Promise<void> {
  await db.query('UPDATE subscription_channel SET lease_until = NULL WHERE id = $1', [id]);
}

/**
 * The endpoint acknowledged a notification: mark delivered events, reset the failure count. The
 * lease ends here too once every numbered event is delivered (`release`), saving a round trip.
 * Returns the subscription as it is now.
 */
export async function recordSuccess(db: Db, id: string, now: Date, deliveredThrough?: number, release = false): Promise<Channel | undefined> {
  const { rows } = await db.query<Row>(
    `UPDATE subscription_channel SET failures = 0, next_attempt_at = NULL, error_code = NULL, last_success_at = $2,
            delivered_through = greatest(delivered_through, coalesce($3, delivered_through)),
            lease_until = CASE WHEN $4 AND greatest(delivered_through, coalesce($3, delivered_through)) >= events_since_start THEN NULL ELSE lease_until END
      WHERE id = $1
      RETURNING ${COLUMNS}, lease_until IS NOT NULL AS leased`,
    [id, now.toISOString(), deliveredThrough ?? null, release],
  );
  return rows[0] && (rows[0] as Row & { leased: boolean }).leased ? toChannel(rows[0]) : undefined;
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
