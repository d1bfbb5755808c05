import crypto from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisState } from '../../src/guard/state/redis-state';
import { stateKey, type SharedState } from '../../src/guard/state/shared-state';
import { EmbeddedState, SqlState } from '../../src/guard/state/sql-state';
import { createTestContext } from '../helpers/context';

/**
 * `firstUseAndTake` (a DPoP proof's jti and its nonce in one round trip) and
 * `firstUsesAndCount` (a request's single uses and counter) on every adapter this project can
 * reach: Redis when REDIS_URL is set, and the database (PostgreSQL or PGlite).
 */
let ctx: Awaited<ReturnType<typeof createTestContext>>;
let redis: Redis | undefined;
const adapters: [string, () => SharedState][] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  if (process.env.REDIS_URL) redis = new Redis(process.env.REDIS_URL, { lazyConnect: true });
  await redis?.connect();
});
afterAll(async () => {
  redis?.disconnect();
  await ctx.db.close();
});

adapters.push(['the database', () => (ctx.db.processMemory ? new EmbeddedState(ctx.db, ctx.db.processMemory) : new SqlState(ctx.db))]);
if (process.env.REDIS_URL) adapters.push(['Redis', () => new RedisState(redis!)]);

describe.each(adapters)('firstUseAndTake on %s', (_name, make) => {
  const use = () => ({ key: stateKey('dpop', crypto.randomUUID()), expiresAt: new Date(ctx.now().getTime() + 300_000) });

  test('records the use and takes a live value once', async () => {
    const state = make();
    const nonce = stateKey('nonce', crypto.randomUUID());
    await state.put(nonce, new Date(ctx.now().getTime() + 60_000));
    const u = use();
    expect(await state.firstUseAndTake(u, nonce, ctx.now())).toEqual({ first: true, taken: true });
    expect(await state.firstUseAndTake(u, nonce, ctx.now())).toEqual({ first: false, taken: false });
    // The use was recorded where firstUse looks too.
    expect(await state.firstUse(u.key, u.expiresAt, ctx.now())).toBe(false);
  });

  test('an unknown or expired value is not taken, and the use is recorded all the same', async () => {
    const state = make();
    const expired = stateKey('nonce', crypto.randomUUID());
    await state.put(expired, new Date(ctx.now().getTime() + 1_000));
    const later = new Date(ctx.now().getTime() + 5_000);
    const u = use();
    expect(await state.firstUseAndTake(u, expired, later)).toEqual({ first: true, taken: false });
    expect(await state.take(expired, later)).toBe(false);
    const v = use();
    expect(await state.firstUseAndTake(v, stateKey('nonce', 'never-issued'), ctx.now())).toEqual({ first: true, taken: false });
    expect(await state.firstUse(v.key, v.expiresAt, ctx.now())).toBe(false);
  });

  test('two racing calls with the same use and value: one first, one taken', async () => {
    const state = make();
    const nonce = stateKey('nonce', crypto.randomUUID());
    await state.put(nonce, new Date(ctx.now().getTime() + 60_000));
    const u = use();
    const results = await Promise.all([state.firstUseAndTake(u, nonce, ctx.now()), state.firstUseAndTake(u, nonce, ctx.now())]);
    expect(results.filter((r) => r.first)).toHaveLength(1);
    expect(results.filter((r) => r.taken)).toHaveLength(1);
  });
});

describe.each(adapters)('firstUsesAndCount on %s', (_name, make) => {
  const window = () => {
    const start = Math.floor(ctx.now().getTime() / 60_000) * 60_000;
    return { start, resetMs: start + 60_000 };
  };

  test('calls at the same moment answer as if run one after the other: each use first once, each counter counting every call', async () => {
    const state = make();
    const w = window();
    const buckets = [`a-${crypto.randomUUID()}`, `b-${crypto.randomUUID()}`];
    const keys = Array.from({ length: 5 }, () => stateKey('dpop', crypto.randomUUID()));
    const expiresAt = new Date(ctx.now().getTime() + 300_000);
    // 30 calls: a repeats every fifth key, one in three also names a second key of its own.
    const calls = Array.from({ length: 30 }, (_, i) => ({
      bucket: buckets[i % 2],
      uses: [{ key: keys[i % 5], expiresAt }, ...(i % 3 === 0 ? [{ key: stateKey('dpop', `own-${crypto.randomUUID()}`), expiresAt }] : [])],
    }));
    const results = await Promise.all(calls.map((c) => state.firstUsesAndCount(c.uses, ctx.now(), c.bucket, w)));
    for (const [i, r] of results.entries()) expect(r.first).toHaveLength(calls[i].uses.length);
    for (let k = 0; k < 5; k++) expect(results.filter((r, i) => i % 5 === k && r.first[0])).toHaveLength(1);
    for (const [i, r] of results.entries()) if (calls[i].uses.length === 2) expect(r.first[1]).toBe(true);
    for (const b of [0, 1]) {
      const counts = results.filter((_, i) => i % 2 === b).map((r) => r.count);
      expect(counts.sort((x, y) => x - y)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    }
    // A later call sees them all.
    const after = await state.firstUsesAndCount([{ key: keys[0], expiresAt }], ctx.now(), buckets[0], w);
    expect(after).toEqual({ first: [false], count: 16 });
  });
});

if (process.env.REDIS_URL) {
  test('Redis: calls made in one turn of the event loop go out together in one script call (one command for many requests)', async () => {
    const state = new RedisState(redis!);
    const script = jest.spyOn(redis as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>, 'terminusLedger');
    try {
      const start = Math.floor(Date.now() / 60_000) * 60_000;
      const w = { start, resetMs: start + 60_000 };
      const expiresAt = new Date(Date.now() + 300_000);
      const bucket = `batch-${crypto.randomUUID()}`;
      const one = (n: number) => Array.from({ length: n }, () => state.firstUsesAndCount([{ key: stateKey('dpop', crypto.randomUUID()), expiresAt }], new Date(), bucket, w));
      const first = one(20);
      const second = one(20); // submitted at the same moment as the first twenty
      const results = await Promise.all([...first, ...second]);
      expect(script).toHaveBeenCalledTimes(1);
      expect(results.every((r) => r.first[0])).toBe(true);
      expect(results.map((r) => r.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    } finally {
      script.mockRestore();
    }
  });
}
