import type { AppContext } from '../../context';

export interface RateLimitRule {
  /** Requests admitted per window. */
  limit: number;
  windowSec: number;
}

export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds (UTC) when the window resets (`x-rate-limit-reset`). */
  resetAt: number;
  /** Seconds until a retry can succeed (`Retry-After`). */
  retryAfter: number;
}

/**
 * Fixed-window counter shared by all replicas: Redis `INCR` + `PEXPIREAT` when ctx.redis is set,
 * else one upsert in PostgreSQL/PGlite. `key` names the bucket, e.g. `token:ip:198.51.100.7`.
 */
export async function hitRateLimit(ctx: AppContext, key: string, rule: RateLimitRule): Promise<RateLimitResult> {
  const nowMs = ctx.now().getTime();
  const windowMs = rule.windowSec * 1000;
  const windowStart = Math.floor(nowMs / windowMs);
  const resetMs = (windowStart + 1) * windowMs;
  let count: number;
  // The rule is part of the key: a changed limit starts fresh counters instead of inheriting others'.
  const bucket = `${key}:${rule.limit}/${rule.windowSec}`;
  if (ctx.redis) {
    const k = `guard:rl:${bucket}:${windowStart}`;
    const res = await ctx.redis.multi().incr(k).pexpireat(k, Math.max(resetMs, Date.now()) + 1000).exec();
    count = Number(res?.[0]?.[1] ?? 1);
  } else {
    const r = await ctx.db.query<{ count: number }>(
      `INSERT INTO guard_rate_counter (key, window_start, count, expires_at) VALUES ($1, $2, 1, $3)
       ON CONFLICT (key, window_start) DO UPDATE SET count = guard_rate_counter.count + 1
       RETURNING count`,
      [bucket, windowStart, new Date(resetMs)],
    );
    count = Number(r.rows[0]?.count ?? 1);
    if (Math.random() < 0.002) await ctx.db.query('DELETE FROM guard_rate_counter WHERE expires_at < $1', [new Date(nowMs)]);
  }
  const allowed = count <= rule.limit;
  return {
    allowed,
    limit: rule.limit,
    remaining: Math.max(0, rule.limit - count),
    resetAt: Math.ceil(resetMs / 1000),
    retryAfter: Math.max(1, Math.ceil((resetMs - nowMs) / 1000)),
  };
}
