import request from 'supertest';
import { GuardClient, GuardClientError, type HttpTransport } from '../../src/client';
import { startServer } from '../../src/server';
import { getTestToken } from '../guard/helpers/get-token';
import { guardHarness, type Harness } from '../guard/helpers/harness';

/** The guard's client library and the test-token helper other parts use. */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness({ env: { REPOSITORY_OWNERS: '1-OWNER' } });
});
afterAll(() => h.close());

test('getTestToken gives a real DPoP-bound token for a chosen institution (supertest app)', async () => {
  const t = await getTestToken(h.app, h.ctx, { telematikId: '1-FHIR-TEST', professionOid: '1.2.276.0.76.4.51' });
  const claims = JSON.parse(Buffer.from(t.accessToken.split('.')[1], 'base64url').toString());
  expect(claims).toMatchObject({ sub: '1-FHIR-TEST', profession_oid: '1.2.276.0.76.4.51', client_id: t.clientId, cnf: { jkt: t.dpopKey.jkt } });
  const proof = await t.makeProof('GET', `${h.publicUrl}/fhir/Appointment?x=1`, t.accessToken);
  const p = JSON.parse(Buffer.from(proof.split('.')[1], 'base64url').toString());
  expect(p).toMatchObject({ htm: 'GET', htu: `${h.publicUrl}/fhir/Appointment` });
  expect(p.ath).toMatch(/^[A-Za-z0-9_-]{43}$/);
});

test('an owner gets system/*.cruds through the helper', async () => {
  const t = await getTestToken(h.app, h.ctx, { telematikId: '1-OWNER' });
  expect(t.scope.split(' ')).toContain('system/*.cruds');
});

test('getTestToken works against a running server by base URL (htu and aud keep naming PUBLIC_URL)', async () => {
  const server = await startServer({ ...h.ctx.config, port: 0, host: '127.0.0.1' }, { ...h.ctx, redis: undefined, db: Object.assign(Object.create(h.ctx.db) as typeof h.ctx.db, { close: async () => {} }) });
  try {
    const t = await getTestToken(server.url, h.ctx, { telematikId: '1-OVER-HTTP' });
    expect(t.accessToken.split('.')).toHaveLength(3);
    const refreshed = await t.client.refresh();
    expect(refreshed.refreshToken).not.toBe(t.refreshToken);
  } finally {
    await server.close();
  }
});

describe('retries', () => {
  const okNonce = { status: 200, headers: {}, text: '{"nonce":"n","expires_in":300}', json: { nonce: 'n', expires_in: 300 } };
  const discovery: HttpTransport = async (req) => {
    if (req.url.endsWith('/.well-known/oauth-protected-resource')) return { status: 200, headers: {}, text: '', json: { resource: 'http://x/fhir', authorization_servers: ['http://x'] } };
    if (req.url.endsWith('/.well-known/oauth-authorization-server')) return { status: 200, headers: {}, text: '', json: { issuer: 'http://x', nonce_endpoint: 'http://x/svc/v1/nonce' } };
    throw new Error('unexpected');
  };

  test('429 and 5xx are retried with backoff until success', async () => {
    const answers = [429, 503, 200];
    let calls = 0;
    const transport: HttpTransport = async (req) => {
      if (!req.url.endsWith('/nonce')) return discovery(req);
      calls++;
      const status = answers.shift()!;
      return status === 200 ? okNonce : { status, headers: {}, text: '{}', json: { error: status === 429 ? 'rate_limit_exceeded' : 'temporarily_unavailable' } };
    };
    const c = new GuardClient({ server: 'http://x', transport, retries: 3, backoffMs: 1 });
    expect(await c.fetchNonce()).toBe('n');
    expect(calls).toBe(3);
  });

  test('400 is not retried and surfaces the error code', async () => {
    let calls = 0;
    const transport: HttpTransport = async (req) => {
      if (!req.url.endsWith('/nonce')) return discovery(req);
      calls++;
      return { status: 400, headers: {}, text: '', json: { error: 'invalid_request', error_description: 'no' } };
    };
    const c = new GuardClient({ server: 'http://x', transport, retries: 3, backoffMs: 1 });
    const err = await c.fetchNonce().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GuardClientError);
    expect((err as GuardClientError).error).toBe('invalid_request');
    expect(calls).toBe(1);
  });

  test('a 404 re-runs discovery once (A_28426)', async () => {
    let discoveries = 0;
    let first = true;
    const transport: HttpTransport = async (req) => {
      if (req.url.includes('/.well-known/oauth-protected-resource')) discoveries++;
      if (!req.url.endsWith('/nonce')) return discovery(req);
      if (first) {
        first = false;
        return { status: 404, headers: {}, text: '', json: { error: 'resource_not_found' } };
      }
      return okNonce;
    };
    const c = new GuardClient({ server: 'http://x', transport, retries: 0 });
    expect(await c.fetchNonce()).toBe('n');
    expect(discoveries).toBe(2);
  });
});

test('the nonce endpoint from discovery is what the client uses', async () => {
  const res = await request(h.app).get('/.well-known/oauth-authorization-server');
  expect([res.status, res.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
  const meta = res.body;
  expect(meta.nonce_endpoint).toBe(`${h.publicUrl}/svc/v1/nonce`);
});

describe('session upkeep', () => {
  test('ensureAccessToken keeps a fresh token, refreshes a stale one, and re-attests when the refresh token expired', async () => {
    const { loggedInClient } = await import('../guard/helpers/harness');
    const { testCard } = await import('../guard/helpers/get-token');
    const card = testCard(h.ctx, { telematikId: '1-TEST-PRAXIS' });
    const c = await loggedInClient(h);
    const first = c.tokens!;
    expect(await c.ensureAccessToken(card)).toBe(first.accessToken);
    h.ctx.clock.advance(295_000);
    try {
      const refreshed = await c.ensureAccessToken(card);
      expect(refreshed).not.toBe(first.accessToken);
      const sidOf = (t: string) => JSON.parse(Buffer.from(t.split('.')[1], 'base64url').toString()).sid;
      expect(sidOf(refreshed)).toBe(sidOf(first.accessToken));
      h.ctx.clock.advance(86_400_000);
      const reattested = await c.ensureAccessToken(card);
      expect(sidOf(reattested)).not.toBe(sidOf(first.accessToken));
    } finally {
      h.ctx.clock.advance(-295_000 - 86_400_000);
    }
  });
});

test('discovery is cached a day, then revalidated with If-None-Match: a 304 keeps the cached documents', async () => {
  const { supertestTransport } = await import('../guard/helpers/transport');
  const inner = supertestTransport(h.app);
  const seen: { url: string; ifNoneMatch?: string; status: number }[] = [];
  const transport: HttpTransport = async (req) => {
    const res = await inner(req);
    seen.push({ url: req.url, ifNoneMatch: req.headers['if-none-match'], status: res.status });
    return res;
  };
  const c = new GuardClient({ server: h.publicUrl, transport, retries: 0 });
  const first = await c.discover();
  expect(first.etags?.resource).toMatch(/^(W\/)?"/);
  expect(seen.every((s) => s.ifNoneMatch === undefined)).toBe(true);
  await c.discover();
  expect(seen).toHaveLength(2); // within the day: no request
  c.discoveryCache!.fetchedAt -= 25 * 3600 * 1000;
  const again = await c.discover();
  expect(seen.slice(2).map((s) => [s.status, Boolean(s.ifNoneMatch)])).toEqual([
    [304, true],
    [304, true],
  ]);
  expect(again.authorizationServer.token_endpoint).toBe(first.authorizationServer.token_endpoint);
  expect(again.resource.resource).toBe(first.resource.resource);
});
