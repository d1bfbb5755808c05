import type { TestToken } from '../helpers/get-token';
import { call, institution, pepHarness, proofFor, type PepHarness } from './helpers';

/**
 * Two app instances on one store (and one Redis when REDIS_URL is set), as the two replicas of
 * docker-compose.yml: a proof is single-use across both (RFC 9449 §11.1), and the
 * per-client rate limit counts requests on either.
 */
describe('two replicas sharing one store', () => {
  let one: PepHarness;
  let two: PepHarness;
  let t: TestToken;
  beforeAll(async () => {
    one = await pepHarness({ env: { RATE_LIMIT_FHIR_PER_CLIENT: '40' } });
    two = await pepHarness({ env: { RATE_LIMIT_FHIR_PER_CLIENT: '40' }, db: one.ctx.db });
    t = await institution(one, { telematikId: '1-PEP-REPLICA' });
  });
  afterAll(async () => {
    await two.close();
    await one.close();
  });

  test('a token issued by one replica is accepted by the other', async () => {
    expect((await call(two, t, 'GET', '/Slot')).status).toBe(200);
  });

  test('a proof used at one replica is refused at the other', async () => {
    const proof = await proofFor(one, t.dpopKey, 'GET', '/Slot', t.accessToken);
    expect((await call(one, t, 'GET', '/Slot', { proof })).status).toBe(200);
    const replay = await call(two, t, 'GET', '/Slot', { proof });
    expect(replay.status).toBe(401);
    expect(replay.body.error).toBe('invalid_dpop_proof');
    expect(replay.body.error_description).toBe('DPoP proof jti has been used before');
  });

  test('the same proof sent 10 times at once to both replicas passes exactly once', async () => {
    const proof = await proofFor(one, t.dpopKey, 'GET', '/Slot', t.accessToken);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(i % 2 ? two : one, t, 'GET', '/Slot', { proof })));
    expect(results.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(401)]);
  });
});

describe('rate limit per client_id on /fhir', () => {
  let one: PepHarness;
  let two: PepHarness;
  beforeAll(async () => {
    one = await pepHarness({ env: { RATE_LIMIT_FHIR_PER_CLIENT: '3' } });
    two = await pepHarness({ env: { RATE_LIMIT_FHIR_PER_CLIENT: '3' }, db: one.ctx.db });
  });
  afterAll(async () => {
    await two.close();
    await one.close();
  });

  test('x-rate-limit-* on every answer; over the limit 429 rate_limit_exceeded with Retry-After, counted across replicas; other clients unaffected', async () => {
    const t = await institution(one, { telematikId: '1-PEP-LIMIT' });
    const other = await institution(one, { telematikId: '1-PEP-LIMIT' });
    // The window is a fixed minute: keep the four requests inside one.
    const toNextMinute = 60_000 - (Date.now() % 60_000);
    if (toNextMinute < 3000) await new Promise((r) => setTimeout(r, toNextMinute + 50));
    const answers = [await call(one, t, 'GET', '/Slot'), await call(two, t, 'GET', '/Slot'), await call(one, t, 'GET', '/Slot'), await call(two, t, 'GET', '/Slot')];
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(answers.map((r) => r.headers['x-rate-limit-limit'])).toEqual(['3', '3', '3', '3']);
    expect(answers.map((r) => r.headers['x-rate-limit-remaining'])).toEqual(['2', '1', '0', '0']);
    for (const r of answers) expect(Number(r.headers['x-rate-limit-reset'])).toBeGreaterThan(Date.now() / 1000 - 1);
    const limited = answers[3];
    expect(limited.body.error).toBe('rate_limit_exceeded');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await call(one, other, 'GET', '/Slot')).status).toBe(200);
  });
});
