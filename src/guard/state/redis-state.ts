import type { Redis } from 'ioredis';
import { TickBatch } from '../../server-lib/group-commit';
import { SharedStateUnavailable, type SharedState, type SingleUse, type StateKey, type Window } from './shared-state';

/**
 * Redis: `SET NX PXAT` for single use, `INCR` + `PEXPIREAT` (one script) for counters, `GETDEL` for nonces;
 * Redis expires the keys. Expiry is set on the wall clock (at least a second ahead): the protocol
 * clock decides validity, the stored expiry only bounds memory.
 */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  /**
   * Every request's single uses and counter (the enforcement point's and the token endpoint's):
   * the calls made in one turn of the event loop go out together, one command for Redis and one
   * write on the socket for all of them (each keeps its own answer, as if run one after the other).
   */
  private readonly ledger = new TickBatch<LedgerCall, { first: boolean[]; count: number }>((calls) => this.ledgerBatch(calls));

  constructor(private readonly redis: Redis) {
    // One script instead of a MULTI: one command for Redis to parse and run per batch. ioredis
    // sends EVALSHA and falls back to EVAL when Redis lost its script cache (a restart).
    if (!(LEDGER in redis)) redis.defineCommand(LEDGER, { lua: LEDGER_LUA });
    if (!(COUNT in redis)) redis.defineCommand(COUNT, { numberOfKeys: 1, lua: COUNT_LUA });
    if (!(FIRST_USE_AND_TAKE in redis)) redis.defineCommand(FIRST_USE_AND_TAKE, { numberOfKeys: 2, lua: FIRST_USE_AND_TAKE_LUA });
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
    const script = (this.redis as unknown as Record<string, Count>)[COUNT];
    const res = await this.run(() => script.call(this.redis, counterKey(bucket, window), String(wallExpiry(new Date(window.resetMs)))));
    return Number(res);
  }

  firstUsesAndCount(uses: readonly SingleUse[], _now: Date, bucket: string, window: Window): Promise<{ first: boolean[]; count: number }> {
    return this.ledger.submit({ uses, bucket, window });
  }

  private async ledgerBatch(calls: LedgerCall[]): Promise<{ first: boolean[]; count: number }[]> {
    const script = (this.redis as unknown as Record<string, Ledger>)[LEDGER];
    const keys: string[] = [];
    const expiries: string[] = [];
    for (const c of calls) {
      keys.push(counterKey(c.bucket, c.window), ...c.uses.map((u) => seenKey(u.key)));
      expiries.push(String(wallExpiry(new Date(c.window.resetMs))), ...c.uses.map((u) => String(wallExpiry(u.expiresAt))));
    }
    const sizes = calls.map((c) => String(1 + c.uses.length));
    const reply = await this.run(() => script.call(this.redis, keys.length, ...keys, ...expiries, ...sizes));
    let at = 0;
    return calls.map((c) => {
      const count = Number(reply[at]);
      const first = c.uses.map((_, i) => reply[at + 1 + i] === 1);
      at += 1 + c.uses.length;
      return { count, first };
    });
  }

  async firstUseAndTake(use: SingleUse, value: StateKey, now: Date): Promise<{ first: boolean; taken: boolean }> {
    const script = (this.redis as unknown as Record<string, FirstUseAndTake>)[FIRST_USE_AND_TAKE];
    const [first, stored] = await this.run(() => script.call(this.redis, seenKey(use.key), nonceKey(value), String(wallExpiry(use.expiresAt))));
    return { first: first === 1, taken: stored !== '' && Number(stored) > now.getTime() };
  }

  private async run<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (err) {
      throw new SharedStateUnavailable(err);
    }
  }
}

/** KEYS[1]: the counter; ARGV[1]: its expiry (Unix ms). One command where a MULTI would be four. */
const COUNT = 'terminusCount';
type Count = (key: string, expiry: string) => Promise<number>;
const COUNT_LUA = `
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return n`;

/** KEYS: the single-use key, the value to take; ARGV[1]: the single use's expiry (Unix ms). Returns {1 or 0 (first use), the value taken or ''}. */
const FIRST_USE_AND_TAKE = 'terminusFirstUseAndTake';
type FirstUseAndTake = (useKey: string, valueKey: string, expiry: string) => Promise<[number, string]>;
const FIRST_USE_AND_TAKE_LUA = `
local first = 0
if redis.call('SET', KEYS[1], '1', 'PXAT', ARGV[1], 'NX') then first = 1 end
local stored = redis.call('GETDEL', KEYS[2])
if not stored then stored = '' end
return {first, stored}`;

interface LedgerCall {
  uses: readonly SingleUse[];
  bucket: string;
  window: Window;
}

const LEDGER = 'terminusLedger';
type Ledger = (numberOfKeys: number, ...keysThenArgs: string[]) => Promise<number[]>;
/**
 * Calls in turn, each a counter followed by its single-use keys. KEYS: every call's keys; ARGV:
 * their expiries (Unix ms) in the same order, then each call's number of keys. Returns, per call,
 * {count, 1 or 0 per single-use key (1: first use)}, one flat list.
 */
const LEDGER_LUA = `
local out = {}
local k = 1
for g = #KEYS + 1, #ARGV do
  out[#out + 1] = redis.call('INCR', KEYS[k])
  redis.call('PEXPIREAT', KEYS[k], ARGV[k])
  for i = k + 1, k + tonumber(ARGV[g]) - 1 do
    if redis.call('SET', KEYS[i], '1', 'PXAT', ARGV[i], 'NX') then out[#out + 1] = 1 else out[#out + 1] = 0 end
  end
  k = k + tonumber(ARGV[g])
end
return out`;

const nonceKey = (key: StateKey) => `guard:${key.namespace}:${key.hash}`;
const seenKey = (key: StateKey) => `guard:seen:${key.namespace}:${key.hash}`;
const counterKey = (bucket: string, window: Window) => `guard:rl:${bucket}:${window.start}`;
const wallExpiry = (at: Date) => Math.max(at.getTime(), Date.now()) + 1000;
