import crypto from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisState } from '../../src/guard/state/redis-state';
import { stateKey, type SharedState } from '../../src/guard/state/shared-state';
import { EmbeddedState, SqlState } from '../../src/guard/state/sql-state';
import { createTestContext } from '../helpers/context';

/**
 * `firstUseAndTake` (a DPoP proof's jti and its nonce in one round trip, issue 15) on every adapter
 * this project can reach: Redis when REDIS_URL is set, and the database (PostgreSQL or PGlite).
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
