import type { Redis } from 'ioredis';
import { SharedStateUnavailable, type SharedState, type StateKey, type Window } from './shared-state';

/**
 * Redis: `SET NX PXAT` for single use, `INCR` + `PEXPIREAT` for counters, `GETDEL` for nonces;
 * Redis expires the keys. Expiry is set on the wall clock (at least a second ahead): the protocol
 * clock decides validity, the stored expiry only bounds memory.
 */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;

  constructor(private readonly redis: Redis) {
    // One script instead of a 5-command MULTI: one command for Redis to parse and run per request.
    // ioredis sends EVALSHA and falls back to EVAL when Redis lost its script cache (a restart).
    if (!(FIRST_USE_AND_COUNT in redis)) redis.defineCommand(FIRST_USE_AND_COUNT, { numberOfKeys: 2, lua: FIRST_USE_AND_COUNT_LUA });
  }

  async put(key: StateKey, expiresAt: Date): Promise<void> {
    await this.run(() => this.redis.call('SET', nonceKey(key), String(expiresAt.getTime()), 'PXAT', String(wallExpiry(expiresAt))));
  }

  async take(key: StateKey, now: Date): Promise<boolean> {
    const v = await this.run(() => this.redis.call('GETDEL', nonceKey(key)));
    return typeof v === 'string' && Number(v) > now.getTime();
  }

  async firstUse(key: StateKey, expiresAt: Date): Promise<boolean> {
    const ok = await this.run(() => this.redis.call('SET', seenKey(key), '1', 'PXAT', String(wallExpiry(expiresAt)), 'NX'));
    return ok === 'OK';
  }

  async count(bucket: string, window: Window): Promise<number> {
    const k = counterKey(bucket, window);
    const res = await this.run(() => this.redis.multi().incr(k).pexpireat(k, wallExpiry(new Date(window.resetMs))).exec());
    return Number(res?.[0]?.[1] ?? 1);
  }

  async firstUseAndCount(key: StateKey, expiresAt: Date, _now: Date, bucket: string, window: Window): Promise<{ first: boolean; count: number }> {
    const script = (this.redis as unknown as Record<string, FirstUseAndCount>)[FIRST_USE_AND_COUNT];
    const [first, count] = await this.run(() =>
      script.call(this.redis, seenKey(key), counterKey(bucket, window), String(wallExpiry(expiresAt)), String(wallExpiry(new Date(window.resetMs)))),
    );
    return { first: first === 1, count: Number(count) };
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (err) {
      throw new SharedStateUnavailable(err);
    }
  }
}

const FIRST_USE_AND_COUNT = 'terminusFirstUseAndCount';
type FirstUseAndCount = (seen: string, counter: string, seenExpiry: string, counterExpiry: string) => Promise<[number, number]>;
/** KEYS: the replay key, the counter; ARGV: their expiries (Unix ms). Returns {1 if first use, count}. */
const FIRST_USE_AND_COUNT_LUA = `
local first = redis.call('SET', KEYS[1], '1', 'PXAT', ARGV[1], 'NX')
local count = redis.call('INCR', KEYS[2])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
if first then return {1, count} end
return {0, count}`;

const nonceKey = (key: StateKey) => `guard:${key.namespace}:${key.hash}`;
const seenKey = (key: StateKey) => `guard:seen:${key.namespace}:${key.hash}`;
const counterKey = (bucket: string, window: Window) => `guard:rl:${bucket}:${window.start}`;
const wallExpiry = (at: Date) => Math.max(at.getTime(), Date.now()) + 1000;
