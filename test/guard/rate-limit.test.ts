import crypto from 'node:crypto';
import request from 'supertest';
import { exchange, guardHarness, loggedInClient, type Harness } from './helpers/harness';

/** Rate limits (docs/requirements.md#dpop-and-the-enforcement-point). Each test uses its own client IP via Forwarded. */
const randomIp = () => `2001:db8::${crypto.randomBytes(4).toString('hex').replace(/(.{4})(.{4})/, '$1:$2')}`;
const fwd = (ip: string) => ({ Forwarded: `for="[${ip}]"` });

describe('with the default limits', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await guardHarness();
  });
  afterAll(() => h.close());

  test.each([
    ['GET', '/.well-known/oauth-authorization-server'],
    ['GET', '/.well-known/oauth-protected-resource'],
    ['GET', '/svc/v1/jwks'],
    ['GET', '/svc/v1/nonce'],
    ['POST', '/svc/v1/register'],
    ['POST', '/svc/v1/token'],
    ['POST', '/svc/v1/revoke'],
  ])('%s %s carries x-rate-limit-limit, -remaining and -reset (A_26668-02)', async (method, path) => {
    // The window that counted the request ends after it was sent (not necessarily after the answer
    // arrived: on a busy machine the window may close in between).
    const sent = Date.now() / 1000;
    const res = method === 'GET' ? await request(h.app).get(path) : await request(h.app).post(path).send('');
    expect(Number(res.headers['x-rate-limit-limit'])).toBe(3000);
    expect(Number(res.headers['x-rate-limit-remaining'])).toBeLessThan(3000);
    const reset = Number(res.headers['x-rate-limit-reset']);
    expect(reset).toBeGreaterThan(sent);
    expect(reset).toBeLessThanOrEqual(Date.now() / 1000 + 61);
  });

  test('admit at least 20 requests per second from one client IP on each endpoint', async () => {
    const ip = randomIp();
    const started = Date.now();
    const nonces = await Promise.all(Array.from({ length: 40 }, () => request(h.app).get('/svc/v1/nonce').set(fwd(ip))));
    const metas = await Promise.all(Array.from({ length: 40 }, () => request(h.app).get('/.well-known/oauth-authorization-server').set(fwd(ip))));
    expect(Date.now() - started).toBeLessThan(60_000);
    expect([...nonces, ...metas].every((r) => r.status === 200)).toBe(true);
  });
});

describe('with small limits (RATE_LIMIT_PER_IP=5, RATE_LIMIT_PER_CLIENT=3), counters in PostgreSQL', () => {
  let h: Harness;
  beforeAll(async () => {
    // Counters in this test's own schema: deterministic however often the suite runs in a minute.
    h = await guardHarness({ env: { RATE_LIMIT_PER_IP: '5', RATE_LIMIT_PER_CLIENT: '3' }, redis: false });
  });
  afterAll(() => h.close());

  test('the 6th request of a minute from one IP is 429 rate_limit_exceeded with Retry-After; other IPs and endpoints are unaffected', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) expect((await request(h.app).get('/svc/v1/nonce').set(fwd(ip))).status).toBe(200);
    const limited = await request(h.app).get('/svc/v1/nonce').set(fwd(ip));
    expect(limited.status).toBe(429);
    expect(limited.body.error).toBe('rate_limit_exceeded');
    expect(limited.headers['x-rate-limit-remaining']).toBe('0');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect((await request(h.app).get('/svc/v1/nonce').set(fwd(randomIp()))).status).toBe(200);
    expect((await request(h.app).get('/.well-known/oauth-authorization-server').set(fwd(ip))).status).toBe(200);
  });

  test('the window resets after a minute', async () => {
    const ip = randomIp();
    for (let i = 0; i < 6; i++) await request(h.app).get('/svc/v1/nonce').set(fwd(ip));
    expect((await request(h.app).get('/svc/v1/nonce').set(fwd(ip))).status).toBe(429);
    h.ctx.clock.advance(60_000);
    try {
      expect((await request(h.app).get('/svc/v1/nonce').set(fwd(ip))).status).toBe(200);
    } finally {
      h.ctx.clock.advance(-60_000);
    }
  });

  test('a client_id is limited across addresses at the token endpoint', async () => {
    const c = await loggedInClient(h);
    const client = { clientId: c.clientId!, clientKey: c.clientKey! };
    // the login above was the first request of this client in this window
    for (let i = 0; i < 2; i++) {
      const { res } = await exchange(h, { client, headers: fwd(randomIp()) });
      expect(res.status).toBe(200);
    }
    const { res } = await exchange(h, { client, headers: fwd(randomIp()) });
    expect(res.status).toBe(429);
    expect(res.body.error).toBe('rate_limit_exceeded');
    expect(res.headers['retry-after']).toBeDefined();
  });
});

(process.env.REDIS_URL ? describe : describe.skip)('with small limits, counters in Redis (REDIS_URL)', () => {
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    a = await guardHarness({ env: { RATE_LIMIT_PER_IP: '7' } });
    b = await guardHarness({ env: { RATE_LIMIT_PER_IP: '7' } });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  test('two replicas share one counter per client IP', async () => {
    const ip = randomIp();
    for (let i = 0; i < 7; i++) expect((await request(i % 2 ? a.app : b.app).get('/svc/v1/nonce').set(fwd(ip))).status).toBe(200);
    const limited = await request(a.app).get('/svc/v1/nonce').set(fwd(ip));
    expect(limited.status).toBe(429);
    expect(limited.body.error).toBe('rate_limit_exceeded');
    expect((await request(b.app).get('/svc/v1/nonce').set(fwd(ip))).status).toBe(429);
  });
});
