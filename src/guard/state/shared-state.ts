import crypto from 'node:crypto';
import type { AppContext } from '../../context';
import { RedisState } from './redis-state';
import { EmbeddedState, SqlState } from './sql-state';

/** A key of the shared state: a namespace and the SHA-256 of the client-chosen part. */
export interface StateKey {
  namespace: string;
  hash: string;
}

/**
 * The one key scheme of the guard's shared state: whatever a client chose (a jti, a nonce) is
 * hashed, so keys have a bounded length and no client byte (NUL, ...) ever reaches Redis or a
 * table.
 */
export function stateKey(namespace: string, raw: string): StateKey {
  return { namespace, hash: crypto.createHash('sha256').update(raw).digest('base64url') };
}

/** A value that may be used once until `expiresAt` (a jti). */
export interface SingleUse {
  key: StateKey;
  expiresAt: Date;
}

/** A fixed window of a rate limit: its number and when it ends. */
export interface Window {
  start: number;
  resetMs: number;
}

/**
 * What every replica of the guard must agree on: single-use values (nonces, replay caches) and
 * fixed-window counters. One adapter per application, chosen once (`sharedState`): Redis when
 * REDIS_URL is set, else the database (PostgreSQL, or PGlite with the per-request pair in memory).
 * Times are the protocol clock's (`ctx.now`), so tests can move them.
 */
export interface SharedState {
  readonly kind: 'redis' | 'postgres' | 'embedded';
  /** Stores a single-use value until `expiresAt` (a nonce). */
  put(key: StateKey, expiresAt: Date): Promise<void>;
  /** Removes the value; true when it was there and had not expired at `now`. */
  take(key: StateKey, now: Date): Promise<boolean>;
  /** True exactly once per key until `expiresAt`, atomically across replicas. */
  firstUse(key: StateKey, expiresAt: Date, now: Date): Promise<boolean>;
  /** Counts one hit in `bucket`'s window; the count after it. */
  count(bucket: string, window: Window): Promise<number>;
  /**
   * `firstUse` of each key and `count` of the bucket in one round trip (the enforcement point and
   * the token endpoint, on every request): `first[i]` answers `uses[i]`.
   */
  firstUsesAndCount(uses: readonly SingleUse[], now: Date, bucket: string, window: Window): Promise<{ first: boolean[]; count: number }>;
  /**
   * `firstUse` of `use` and `take` of `value` in one round trip (a DPoP proof's jti and its server
   * nonce, on every request that starts a session): `use` is recorded whatever `value` holds.
   */
  firstUseAndTake(use: SingleUse, value: StateKey, now: Date): Promise<{ first: boolean; taken: boolean }>;
}

/** Thrown by the Redis adapter when Redis does not answer: the guard answers 503, not 500. */
export class SharedStateUnavailable extends Error {
  readonly code = 'shared_state_unavailable';
  constructor(override readonly cause: unknown) {
    super(`shared guard state unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** The adapter for this context, chosen once. */
export function sharedState(ctx: AppContext): SharedState {
  if (ctx.redis) return new RedisState(ctx.redis);
  return ctx.db.processMemory ? new EmbeddedState(ctx.db, ctx.db.processMemory) : new SqlState(ctx.db);
}
