import request from 'supertest';
import { call, institution, pepHarness, proofFor, type PepHarness } from '../guard/pep/helpers';
import type { TestToken } from '../guard/helpers/get-token';

/**
 * FHIR and HTTP conventions behind the guard: unknown operations, HEAD, CORS,
 * `_pretty`, and an `htu` mismatch that names the URL to sign.
 */
const APP = 'https://app.example.org';
let h: PepHarness;
let t: TestToken;
let narrow: TestToken;

beforeAll(async () => {
  h = await pepHarness({ env: { CORS_ORIGINS: `${APP},http://localhost:3000` }, fixture: true });
  t = await institution(h, { telematikId: '1-CONVENTIONS' });
  narrow = await institution(h, { telematikId: '1-CONVENTIONS-NARROW', scope: 'system/Slot.rs' });
});
afterAll(() => h.close());

describe('an operation this server does not have', () => {
  test.each([
    ['type level, GET', 'GET', '/Patient/$everything'],
    ['instance level, POST', 'POST', '/Appointment/a1/$foo'],
    ['system level, POST', 'POST', '/$export'],
  ])('%s: 404 not-supported, whatever the scopes', async (_name, method, path) => {
    for (const token of [t, narrow]) {
      const res = await call(h, token, method, path, method === 'POST' ? { body: { resourceType: 'Parameters' } } : {});
      expect(res.status).toBe(404);
      expect(res.body.resourceType).toBe('OperationOutcome');
      expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'not-supported' });
      expect(res.body.issue[0].diagnostics).toMatch(/no operation \$/);
    }
  });

  test('a known operation still needs its scopes', async () => {
    const res = await call(h, narrow, 'POST', '/Appointment/$book', { body: { resourceType: 'Parameters' } });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('insufficient_scope');
  });
});

describe('HEAD', () => {
  test('HEAD of a read answers the GET headers without a body', async () => {
    const get = await call(h, t, 'GET', '/Slot/Slot-Free-Example');
    const head = await call(h, t, 'HEAD', '/Slot/Slot-Free-Example');
    expect(head.status).toBe(200);
    expect(head.headers.etag).toBe(get.headers.etag);
    expect(head.headers['content-type']).toBe(get.headers['content-type']);
    expect(head.text ?? '').toBe('');
  });

  test('HEAD of a search needs the search scope, as GET does', async () => {
    expect((await call(h, narrow, 'HEAD', '/Slot')).status).toBe(200);
    const refused = await call(h, narrow, 'HEAD', '/Appointment');
    expect(refused.status).toBe(403);
    expect(refused.headers['www-authenticate']).toMatch(/insufficient_scope/);
  });

  test('HEAD of /fhir/metadata needs no token', async () => {
    const res = await request(h.app).head('/fhir/metadata');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
  });
});

describe('CORS (CORS_ORIGINS)', () => {
  test('a preflight from an allowed origin may send Authorization and DPoP; no token needed', async () => {
    const res = await request(h.app).options('/fhir/Slot').set('Origin', APP).set('Access-Control-Request-Method', 'GET').set('Access-Control-Request-Headers', 'authorization,dpop');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    expect(res.headers['access-control-allow-headers']).toMatch(/Authorization/);
    expect(res.headers['access-control-allow-headers']).toMatch(/DPoP/);
    expect(res.headers['access-control-allow-methods']).toMatch(/PATCH/);
  });

  test('an answer to an allowed origin exposes the version, location and nonce headers', async () => {
    const res = await call(h, t, 'GET', '/Slot/Slot-Free-Example', { headers: { Origin: APP } });
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(APP);
    const exposed = String(res.headers['access-control-expose-headers']).split(',');
    expect(exposed).toEqual(expect.arrayContaining(['SVC-API-Version', 'Location', 'Content-Location', 'DPoP-Nonce', 'WWW-Authenticate']));
  });

  test('another origin gets no CORS headers', async () => {
    const res = await request(h.app).options('/fhir/Slot').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'GET');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const get = await call(h, t, 'GET', '/Slot/Slot-Free-Example', { headers: { Origin: 'https://evil.example' } });
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('without CORS_ORIGINS nobody gets CORS headers', async () => {
    const plain = await pepHarness();
    try {
      const res = await request(plain.app).options('/fhir/Slot').set('Origin', APP).set('Access-Control-Request-Method', 'GET');
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});

test('_pretty=true indents the JSON answer; without it the answer is compact', async () => {
  const pretty = await call(h, t, 'GET', '/Slot/Slot-Free-Example?_pretty=true');
  expect(pretty.text).toMatch(/^\{\n {2}"[a-zA-Z]+": /);
  expect(pretty.text).toContain('\n  "resourceType": "Slot"');
  const compact = await call(h, t, 'GET', '/Slot/Slot-Free-Example');
  expect(compact.text).not.toContain('\n');
  expect(JSON.parse(pretty.text)).toEqual(JSON.parse(compact.text));
});

test('a proof signed for another origin is refused naming the URL to sign', async () => {
  const proof = await createProofFor('http://127.0.0.1:9999/fhir/Slot/Slot-Free-Example');
  const res = await call(h, t, 'GET', '/Slot/Slot-Free-Example', { proof });
  expect(res.status).toBe(401);
  expect(res.body.error).toBe('invalid_dpop_proof');
  expect(res.body.error_description).toContain(`expected ${h.base}/Slot/Slot-Free-Example`);
});

async function createProofFor(url: string): Promise<string> {
  const { createDpopProof } = await import('../../src/client');
  const iat = Math.floor(h.ctx.now().getTime() / 1000);
  void proofFor;
  return createDpopProof(t.dpopKey, { method: 'GET', url, accessToken: t.accessToken, iat });
}
