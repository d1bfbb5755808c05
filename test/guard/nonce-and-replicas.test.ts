import request from 'supertest';
import { exchange, guardHarness, type Harness } from './helpers/harness';

/** GET /nonce (docs/requirements.md#discovery-and-versioning) and single use across replicas sharing one store. */
let a: Harness;
let b: Harness;
beforeAll(async () => {
  a = await guardHarness();
  // a second app instance on the same database (and the same Redis when REDIS_URL is set)
  b = await guardHarness({ db: a.ctx.db });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

test('a nonce is 128 random bits, base64url, with expires_in 300 (A_28144)', async () => {
  const res = await request(a.app).get('/svc/v1/nonce');
  expect(res.status).toBe(200);
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.body.expires_in).toBe(300);
  expect(res.body.nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
  expect(Buffer.from(res.body.nonce, 'base64url')).toHaveLength(16);
});

test('two nonces differ', async () => {
  const n1 = (await request(a.app).get('/svc/v1/nonce')).body.nonce;
  const n2 = (await request(a.app).get('/svc/v1/nonce')).body.nonce;
  expect(n1).not.toBe(n2);
});

test('POST /nonce is 405', async () => {
  expect((await request(a.app).post('/svc/v1/nonce')).status).toBe(405);
});

test('a nonce issued by one instance is consumed by the other and then refused by both', async () => {
  const nonce = (await request(a.app).get('/svc/v1/nonce')).body.nonce;
  const atB = await exchange(b, { nonce });
  expect(atB.res.status).toBe(200);
  const againAtA = await exchange(a, { nonce });
  expect(againAtA.res.status).toBe(400);
  expect(againAtA.res.body.error).toBe('use_dpop_nonce');
  const againAtB = await exchange(b, { nonce });
  expect(againAtB.res.status).toBe(400);
  expect(againAtB.res.body.error).toBe('use_dpop_nonce');
});

test('one nonce used concurrently at both instances succeeds exactly once', async () => {
  const nonce = (await request(a.app).get('/svc/v1/nonce')).body.nonce;
  const results = await Promise.all([exchange(a, { nonce }), exchange(b, { nonce }), exchange(a, { nonce }), exchange(b, { nonce })]);
  const statuses = results.map((r) => r.res.status).sort();
  expect(statuses).toEqual([200, 400, 400, 400]);
});

test('tokens signed by one instance verify with the JWKS of the other', async () => {
  const { res } = await exchange(a);
  const kid = JSON.parse(Buffer.from(res.body.access_token.split('.')[0], 'base64url').toString()).kid;
  const jwks = (await request(b.app).get('/svc/v1/jwks')).body;
  expect(jwks.keys.map((k: { kid: string }) => k.kid)).toContain(kid);
});
