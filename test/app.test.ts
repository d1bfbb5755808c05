import request from 'supertest';
import { createApp } from '../src/app';
import { createTestContext } from './helpers/context';
import type { AppContext } from '../src/context';

describe('app shell', () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.db.close());

  test('health and readiness answer with the API version header', async () => {
    const app = createApp(ctx);
    const health = await request(app).get('/healthz');
    expect(health.status).toBe(200);
    expect(health.headers['svc-api-version']).toMatch(/^\d+\.\d+\.\d+/);
    const ready = await request(app).get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready', checks: { store: 'ok', read_replicas: 'not used', redis: ctx.redis ? 'ok' : 'not used', policy_engine: 'ok', card_tsl: 'not used', audit: 'ok' } });
  });

  test('an unknown path answers 404 with the guard error object', async () => {
    const res = await request(createApp(ctx)).get('/nope');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: 'resource_not_found',
      error_description: 'no such endpoint',
      error_uri: `${ctx.config.publicUrl}/svc/v1/errors#resource_not_found`,
    });
  });

  test('readiness answers 503 while the store does not answer', async () => {
    const down = { ...ctx, db: { ...ctx.db, query: () => Promise.reject(new Error('connection terminated')) } };
    const res = await request(createApp(down)).get('/readyz');
    expect([res.status, res.body]).toMatchObject([503, { status: 'unavailable', checks: { store: 'unavailable', policy_engine: 'ok' } }]);
  });

  test('readiness answers 503 naming the policy engine while OPA does not answer, 200 once it does', async () => {
    const http = await import('node:http');
    let healthy = false;
    const opa = http.createServer((req, res) => {
      res.writeHead(req.url === '/health' && healthy ? 200 : 500).end('{}');
    });
    await new Promise<void>((resolve) => opa.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = opa.address() as import('node:net').AddressInfo;
      const app = createApp({ ...ctx, config: { ...ctx.config, policyEngineUrl: `http://127.0.0.1:${port}` } });
      const down = await request(app).get('/readyz');
      expect([down.status, down.body.checks.policy_engine]).toEqual([503, 'unavailable']);
      healthy = true;
      const up = await request(app).get('/readyz');
      expect([up.status, up.body.checks.policy_engine]).toEqual([200, 'ok']);
    } finally {
      opa.close();
    }
  });
});
