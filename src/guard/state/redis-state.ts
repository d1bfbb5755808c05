import type { Redis } from 'ioredis';
import { SharedStateUnavailable, type SharedState, type StateKey, type Window } from './shared-state';

/**
 * Redis: `SET NX PXAT` for single use, `INCR` + `PEXPIREAT` for counters, `GETDEL` for nonces;
 * Redis expires the keys. Expiry is set on the wall clock (at least a second ahead): the protocol
 * clock decides validity, the stored expiry only bounds memory.
 */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;

  constructor(private readonly redis: Redis) {}

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
    const k = counterKey(bucket, window);
    const res = await this.run(() =>
      this.redis
        .multi()
        .call('SET', seenKey(key), '1', 'PXAT', String(wallExpiry(expiresAt)), 'NX')
        .incr(k)
        .pexpireat(k, wallExpiry(new Date(window.resetMs)))
        .exec(),
    );
    return { first: res?.[0]?.[1] === 'OK', count: Number(res?.[1]?.[1] ?? 1) };
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (err) {
      throw new SharedStateUnavailable(err);
    }
  }
}

const nonceKey = (key: StateKey) => `guard:${key.namespace}:${key.hash}`;
const seenKey = (key: StateKey) => `guard:seen:${key.namespace}:${key.hash}`;
const counterKey = (bucket: string, window: Window) => `guard:rl:${bucket}:${window.start}`;
const wallExpiry = (at: Date) => Math.max(at.getTime(), Date.now()) + 1000;
