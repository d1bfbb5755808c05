import type { AppContext } from '../../context';
import type { RateLimitResult, RateLimitRule } from '../state/rate-limit';

/**
 * Replay cache and rate-limit counters of the enforcement point when the store is embedded
 * (PGlite, no Redis). PGlite is one process's database, so no replica can share it: every app
 * on that store runs in this process and shares these maps (keyed by the store). Atomic because
 * JavaScript runs one check at a time; two writes per request to PGlite's single connection would
 * otherwise cost a third of the throughput (bench/RESULTS.md, issue 6). With PostgreSQL or Redis
 * the shared implementations in guard/state are used instead.
 */
interface EmbeddedState {
  seen: Map<string, number>;
  counters: Map<string, { window: number; count: number; resetMs: number }>;
  lastSweep: number;
}

const states = new WeakMap<object, EmbeddedState>();

export function embeddedState(ctx: AppContext): EmbeddedState | undefined {
  if (ctx.redis || ctx.db.kind !== 'pglite') return undefined;
  let s = states.get(ctx.db);
  if (!s) {
    s = { seen: new Map(), counters: new Map(), lastSweep: 0 };
    states.set(ctx.db, s);
  }
  return s;
}

/** True exactly once per key until `expiresAtMs`. */
export function consumeOnceLocally(s: EmbeddedState, key: string, nowMs: number, expiresAtMs: number): boolean {
  sweep(s, nowMs);
  const until = s.seen.get(key);
  if (until !== undefined && until > nowMs) return false;
  s.seen.set(key, expiresAtMs);
  return true;
}

/** The fixed-window counter of guard/state/rate-limit.ts, in memory. */
export function hitRateLimitLocally(s: EmbeddedState, key: string, rule: RateLimitRule, nowMs: number): RateLimitResult {
  sweep(s, nowMs);
  const windowMs = rule.windowSec * 1000;
  const window = Math.floor(nowMs / windowMs);
  const resetMs = (window + 1) * windowMs;
  const c = s.counters.get(key);
  const count = c && c.window === window ? ++c.count : 1;
  if (count === 1) s.counters.set(key, { window, count, resetMs });
  return {
    allowed: count <= rule.limit,
    limit: rule.limit,
    remaining: Math.max(0, rule.limit - count),
    resetAt: Math.ceil(resetMs / 1000),
    retryAfter: Math.max(1, Math.ceil((resetMs - nowMs) / 1000)),
  };
}

/** Drops expired entries about once a second (bounded memory: entries live minutes). */
function sweep(s: EmbeddedState, nowMs: number): void {
  if (nowMs - s.lastSweep < 1000) return;
  s.lastSweep = nowMs;
  for (const [k, until] of s.seen) if (until <= nowMs) s.seen.delete(k);
  for (const [k, c] of s.counters) if (c.resetMs <= nowMs) s.counters.delete(k);
}
