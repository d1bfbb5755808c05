import type { AppContext } from '../../context';
import type { RateLimitResult, RateLimitRule } from '../state/rate-limit';
import { consumeOnceLocally, embeddedState, hitRateLimitLocally } from './embedded-state';

export interface LedgerEntry {
  /** Replay key of the proof (`<jkt>:<jti>`), single use until `seenUntil`. */
  proof: string;
  seenUntil: Date;
  /** Rate-limit bucket (`fhir:client:<hash>`). */
  bucket: string;
  rule: RateLimitRule;
}

export interface LedgerResult {
  /** The proof had not been seen (RFC 9449 §11.1). */
  fresh: boolean;
  rate: RateLimitResult;
}

/**
 * The two pieces of shared state a resource request touches, the DPoP jti (issue 6 point 1) and
 * the per-client counter (point 6), written in one round trip: a Redis MULTI, or one PostgreSQL
 * statement committed without waiting for the WAL flush (a replay-cache row or a counter lost in
 * a database crash costs nothing; waiting for fsync twice per request cost most of the
 * throughput). Keys and tables are those of guard/state (replay-cache.ts, rate-limit.ts), so
 * every replica agrees with them. The embedded store keeps both in memory (embedded-state.ts).
 */
export async function recordRequest(ctx: AppContext, e: LedgerEntry): Promise<LedgerResult> {
  const nowMs = ctx.now().getTime();
  const windowMs = e.rule.windowSec * 1000;
  const windowStart = Math.floor(nowMs / windowMs);
  const resetMs = (windowStart + 1) * windowMs;
  const local = embeddedState(ctx);
  if (local) {
    return { fresh: consumeOnceLocally(local, `dpop:${e.proof}`, nowMs, e.seenUntil.getTime()), rate: hitRateLimitLocally(local, e.bucket, e.rule, nowMs) };
  }
  let fresh: boolean;
  let count: number;
  if (ctx.redis) {
    const rl = `guard:rl:${e.bucket}:${windowStart}`;
    const res = await ctx.redis
      .multi()
      .call('SET', `guard:seen:dpop:${e.proof}`, '1', 'PXAT', String(Math.max(e.seenUntil.getTime(), Date.now() + 1000)), 'NX')
      .incr(rl)
      .pexpireat(rl, Math.max(resetMs, Date.now()) + 1000)
      .exec();
    fresh = res?.[0]?.[1] === 'OK';
    count = Number(res?.[1]?.[1] ?? 1);
  } else {
    // set_config(..., true) lasts until the end of this statement's own transaction: only this
    // commit skips the WAL flush wait, the connection keeps synchronous_commit as configured.
    const r = await ctx.db.query<{ fresh: number; count: number }>(
      `WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
       seen AS (
         INSERT INTO guard_seen (namespace, key, expires_at) VALUES ('dpop', $1, $2)
         ON CONFLICT (namespace, key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE guard_seen.expires_at <= $3
         RETURNING 1),
       counted AS (
         INSERT INTO guard_rate_counter (key, window_start, count, expires_at) VALUES ($4, $5, 1, $6)
         ON CONFLICT (key, window_start) DO UPDATE SET count = guard_rate_counter.count + 1
         RETURNING count)
       SELECT (SELECT count(*) FROM seen)::int AS fresh, (SELECT count FROM counted)::int AS count, (SELECT v FROM async_commit) AS async_commit`,
      [e.proof, e.seenUntil, new Date(nowMs), e.bucket, windowStart, new Date(resetMs)],
    );
    fresh = Number(r.rows[0]?.fresh) === 1;
    count = Number(r.rows[0]?.count ?? 1);
    if (Math.random() < 0.002) {
      await ctx.db.query('DELETE FROM guard_seen WHERE expires_at <= $1', [new Date(nowMs)]);
      await ctx.db.query('DELETE FROM guard_rate_counter WHERE expires_at < $1', [new Date(nowMs)]);
    }
  }
  return {
    fresh,
    rate: {
      allowed: count <= e.rule.limit,
      limit: e.rule.limit,
      remaining: Math.max(0, e.rule.limit - count),
      resetAt: Math.ceil(resetMs / 1000),
      retryAfter: Math.max(1, Math.ceil((resetMs - nowMs) / 1000)),
    },
  };
}
