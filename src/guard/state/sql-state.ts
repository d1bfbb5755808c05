import type { Db } from '../../store';
import type { SharedState, SingleUse, StateKey, Window } from './shared-state';

/** Expired rows are purged at most this often per application (one DELETE per table). */
const PURGE_EVERY_MS = 60_000;

/**
 * PostgreSQL (or PGlite): `INSERT … ON CONFLICT` makes single use atomic across replicas (a
 * find-then-save would let two concurrent requests both pass); counters are upserts. Expired
 * rows go in a purge at most once a minute.
 */
export class SqlState implements SharedState {
  readonly kind: 'postgres' | 'embedded' = 'postgres';
  private purgedAt = -Infinity;

  constructor(protected readonly db: Db) {}

  async put(key: StateKey, expiresAt: Date): Promise<void> {
    await this.db.query('INSERT INTO guard_nonce (nonce, expires_at) VALUES ($1, $2)', [key.hash, expiresAt]);
  }

  async take(key: StateKey, now: Date): Promise<boolean> {
    const r = await this.db.query<{ expires_at: Date }>('DELETE FROM guard_nonce WHERE nonce = $1 RETURNING expires_at', [key.hash]);
    await this.purge(now);
    const row = r.rows[0];
    return row !== undefined && new Date(row.expires_at).getTime() > now.getTime();
  }

  async firstUseAndTake(use: SingleUse, value: StateKey, now: Date): Promise<{ first: boolean; taken: boolean }> {
    const r = await this.db.query<{ first: number; expires_at: Date | string | null }>(
      `WITH seen AS (
         INSERT INTO guard_seen (namespace, key, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (namespace, key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE guard_seen.expires_at <= $4
         RETURNING 1),
       taken AS (DELETE FROM guard_nonce WHERE nonce = $5 RETURNING expires_at)
       SELECT (SELECT count(*) FROM seen)::int AS first, (SELECT expires_at FROM taken) AS expires_at`,
      [use.key.namespace, use.key.hash, use.expiresAt, now, value.hash],
      { prepare: true },
    );
    await this.purge(now);
    const row = r.rows[0];
    return { first: row?.first === 1, taken: row?.expires_at != null && new Date(row.expires_at).getTime() > now.getTime() };
  }

  async firstUse(key: StateKey, expiresAt: Date, now: Date): Promise<boolean> {
    const r = await this.db.query(
      `INSERT INTO guard_seen (namespace, key, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT (namespace, key) DO UPDATE SET expires_at = EXCLUDED.expires_at
         WHERE guard_seen.expires_at <= $4
       RETURNING 1 AS inserted`,
      [key.namespace, key.hash, expiresAt, now],
    );
    await this.purge(now);
    return r.rows.length === 1;
  }

  async count(bucket: string, window: Window): Promise<number> {
    const r = await this.db.query<{ count: number }>(
      `INSERT INTO guard_rate_counter (key, window_start, count, expires_at) VALUES ($1, $2, 1, $3)
       ON CONFLICT (key, window_start) DO UPDATE SET count = guard_rate_counter.count + 1
       RETURNING count`,
      [bucket, window.start, new Date(window.resetMs)],
    );
    return Number(r.rows[0]?.count ?? 1);
  }

  /**
   * One statement committed without waiting for the WAL flush: a replay-cache row or a counter
   * lost in a database crash costs nothing; waiting for fsync on every request cost most of the
   * throughput. `set_config(..., true)` lasts until the end of this statement's own transaction.
   */
  async firstUsesAndCount(uses: readonly SingleUse[], now: Date, bucket: string, window: Window): Promise<{ first: boolean[]; count: number }> {
    const r = await this.db.query<{ fresh: string[] | null; count: number }>(
      `WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
       seen AS (
         INSERT INTO guard_seen (namespace, key, expires_at) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[])
         ON CONFLICT (namespace, key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE guard_seen.expires_at <= $4
         RETURNING namespace || ':' || key AS k),
       counted AS (
         INSERT INTO guard_rate_counter (key, window_start, count, expires_at) VALUES ($5, $6, 1, $7)
         ON CONFLICT (key, window_start) DO UPDATE SET count = guard_rate_counter.count + 1
         RETURNING count)
       SELECT (SELECT array_agg(k) FROM seen) AS fresh, (SELECT count FROM counted)::int AS count, (SELECT v FROM async_commit) AS async_commit`,
      [uses.map((u) => u.key.namespace), uses.map((u) => u.key.hash), uses.map((u) => u.expiresAt), now, bucket, window.start, new Date(window.resetMs)],
      { prepare: true },
    );
    await this.purge(now);
    const fresh = new Set(r.rows[0]?.fresh ?? []);
    return { first: uses.map((u) => fresh.has(`${u.key.namespace}:${u.key.hash}`)), count: Number(r.rows[0]?.count ?? 1) };
  }

  private async purge(now: Date): Promise<void> {
    if (now.getTime() - this.purgedAt < PURGE_EVERY_MS) return;
    this.purgedAt = now.getTime();
    await this.db.query(
      'WITH n AS (DELETE FROM guard_nonce WHERE expires_at <= $1), s AS (DELETE FROM guard_seen WHERE expires_at <= $1) DELETE FROM guard_rate_counter WHERE expires_at < $1',
      [now],
    );
  }
}

/** The per-request pair in memory beside PGlite, shared by every application on that store. */
interface Ledger {
  seen: Map<string, number>;
  counters: Map<string, { window: number; count: number; resetMs: number }>;
  lastSweep: number;
}

/**
 * The embedded store (PGlite, no Redis): like PostgreSQL, except the enforcement point's
 * per-request pair (replay cache and counter), kept in memory beside the database. PGlite is
 * one process's database, so no replica can share it, and JavaScript runs one check at a time;
 * a write per request to PGlite's single connection would cost a third of the throughput
 * (bench/RESULTS.md).
 */
export class EmbeddedState extends SqlState {
  override readonly kind = 'embedded' as const;
  private readonly ledger: Ledger;

  constructor(db: Db, memory: Map<string, unknown>) {
    super(db);
    this.ledger = (memory.get('guard:ledger') as Ledger | undefined) ?? { seen: new Map(), counters: new Map(), lastSweep: 0 };
    memory.set('guard:ledger', this.ledger);
  }

  override async firstUsesAndCount(uses: readonly SingleUse[], now: Date, bucket: string, window: Window): Promise<{ first: boolean[]; count: number }> {
    const l = this.ledger;
    const nowMs = now.getTime();
    this.sweep(nowMs);
    const first = uses.map(({ key, expiresAt }) => {
      const k = `${key.namespace}:${key.hash}`;
      const until = l.seen.get(k);
      const fresh = until === undefined || until <= nowMs;
      if (fresh) l.seen.set(k, expiresAt.getTime());
      return fresh;
    });
    const c = l.counters.get(bucket);
    const count = c && c.window === window.start ? ++c.count : 1;
    if (count === 1) l.counters.set(bucket, { window: window.start, count, resetMs: window.resetMs });
    return { first, count };
  }

  /** Drops expired entries about once a second (bounded memory: entries live minutes). */
  private sweep(nowMs: number): void {
    const l = this.ledger;
    if (nowMs - l.lastSweep < 1000) return;
    l.lastSweep = nowMs;
    for (const [k, until] of l.seen) if (until <= nowMs) l.seen.delete(k);
    for (const [k, c] of l.counters) if (c.resetMs <= nowMs) l.counters.delete(k);
  }
}
