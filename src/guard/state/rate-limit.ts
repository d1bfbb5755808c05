import type { SharedState, Window } from './shared-state';

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

/** A bucket under a rule: the rule is part of the key, so a changed limit starts fresh counters. */
export interface Limit {
  bucket: string;
  rule: RateLimitRule;
  window: Window;
}

/** The fixed window of `rule` that `now` falls in, for the bucket `key` (e.g. `token:ip:198.51.100.7`). */
export function limitFor(key: string, rule: RateLimitRule, now: Date): Limit {
  const windowMs = rule.windowSec * 1000;
  const start = Math.floor(now.getTime() / windowMs);
  return { bucket: `${key}:${rule.limit}/${rule.windowSec}`, rule, window: { start, resetMs: (start + 1) * windowMs } };
}

/** What a count means under the limit. */
export function rateLimitResult(limit: Limit, count: number, now: Date): RateLimitResult {
  const { rule, window } = limit;
  return {
    allowed: count <= rule.limit,
    limit: rule.limit,
    remaining: Math.max(0, rule.limit - count),
    resetAt: Math.ceil(window.resetMs / 1000),
    retryAfter: Math.max(1, Math.ceil((window.resetMs - now.getTime()) / 1000)),
  };
}

/** Counts one hit against the fixed window shared by all replicas. */
export async function hitRateLimit(state: SharedState, key: string, rule: RateLimitRule, now: Date): Promise<RateLimitResult> {
  const limit = limitFor(key, rule, now);
  return rateLimitResult(limit, await state.count(limit.bucket, limit.window), now);
}

/**
 * The headers of every limited answer: `x-rate-limit-*`, and `Retry-After`
 * when the request is refused. The one writer of them, for the authorization server and the
 * enforcement point alike.
 */
export function rateLimitHeaders(r: RateLimitResult): Record<string, string> {
  const headers: Record<string, string> = {
    'x-rate-limit-limit': String(r.limit),
    'x-rate-limit-remaining': String(r.remaining),
    'x-rate-limit-reset': String(r.resetAt),
  };
  if (!r.allowed) headers['Retry-After'] = String(r.retryAfter);
  return headers;
}
