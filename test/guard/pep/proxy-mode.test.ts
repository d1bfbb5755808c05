import type { TestToken } from '../helpers/get-token';
import request from 'supertest';
import { call, decodePayload, institution, pepHarness, proofFor, type PepHarness } from './helpers';
import { loopbackServer, type LoopbackServer } from './loopback';

const STRICT_B64URL = /^[A-Za-z0-9_-]+$/;
const json = (v: string | string[] | undefined) => JSON.parse(Buffer.from(String(v), 'base64url').toString('utf8')) as Record<string, unknown>;

/**
 * The enforcement point in proxy mode (UPSTREAM_URL): what reaches a separate FHIR server, and what
 * the client sees of it (docs/requirements.md#dpop-and-the-enforcement-point; the PoPP header in
 * popp.test.ts).
 */
describe('proxy mode: forwarded identity headers, Forwarded, svc-cause', () => {
  let upstream: LoopbackServer;
  let h: PepHarness;
  let t: TestToken;
  beforeAll(async () => {
    upstream = await loopbackServer((req, res) => {
      if (req.url.includes('proxy-error')) {
        res.writeHead(500, { 'content-type': 'application/json', 'svc-cause': 'Proxy' });
        res.end('{"secret":"stack trace of the resource server"}');
        return;
      }
      res.writeHead(req.url.includes('missing') ? 404 : 200, { 'content-type': 'application/fhir+json', 'x-upstream': 'yes' });
      res.end(JSON.stringify({ resourceType: 'Bundle', type: 'searchset', total: 0 }));
    });
    h = await pepHarness({ env: { UPSTREAM_URL: `${upstream.url}/base/fhir` } });
    // Names at the X.509 limit (64 characters each) push svc-user-info past 250 bytes before fitting.
    t = await institution(h, { telematikId: '1-PEP-PROXY', commonName: `Gemeinschaftspraxis ${'Dr. Musterfrau-'.repeat(3)}`.slice(0, 64), organizationName: 'O'.repeat(64) });
  });
  afterAll(async () => {
    await h.close();
    await upstream.close();
  });

  const last = () => upstream.requests[upstream.requests.length - 1];

  test('the upstream gets svc-user-info and svc-client-data (strict base64url, within 250 bytes, from the token), original headers kept, credentials not (A_26589-01, A_26590-02)', async () => {
    const res = await call(h, t, 'GET', '/Slot?status=free', { headers: { 'x-custom': 'kept', accept: 'application/fhir+json' } });
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream']).toBe('yes');
    const up = last();
    expect(up.url).toBe('/base/fhir/Slot?status=free');
    const at = decodePayload(t.accessToken);
    const userInfo = up.headers['svc-user-info'] as string;
    expect(userInfo).toMatch(STRICT_B64URL);
    expect(userInfo.length).toBeLessThanOrEqual(250);
    const user = json(userInfo);
    expect(user.identifier).toBe(at.sub);
    expect(user.identifier).toBe('1-PEP-PROXY');
    expect(user.professionOID).toBe(at.profession_oid);
    expect(typeof user.commonName).toBe('string');
    expect((at.common_name as string).startsWith(user.commonName as string)).toBe(true);
    const clientData = up.headers['svc-client-data'] as string;
    expect(clientData).toMatch(STRICT_B64URL);
    expect(clientData.length).toBeLessThanOrEqual(250);
    expect(json(clientData).client_id).toBe(at.client_id);
    expect(up.headers['x-custom']).toBe('kept');
    expect(up.headers.accept).toBe('application/fhir+json');
    expect(up.headers.authorization).toBeUndefined();
    expect(up.headers.dpop).toBeUndefined();
    expect(up.headers['svc-popp-token-content']).toBeUndefined();
  });

  test('client-sent svc-* headers are overwritten (A_25669-01) and Forwarded gets our element appended (RFC 7239, A_28439)', async () => {
    const fake = Buffer.from(JSON.stringify({ identifier: 'FAKE', professionOID: 'FAKE', commonName: 'FAKE' })).toString('base64url');
    const res = await call(h, t, 'GET', '/Slot', {
      headers: { 'svc-user-info': fake, 'svc-client-data': fake, 'svc-popp-token-content': 'FAKE', forwarded: 'for=client;proto=http' },
    });
    expect(res.status).toBe(200);
    const up = last();
    expect(up.headers['svc-user-info']).not.toBe(fake);
    expect(json(up.headers['svc-user-info']).identifier).toBe('1-PEP-PROXY');
    expect(json(up.headers['svc-client-data']).client_id).toBe(t.clientId);
    expect(up.headers['svc-popp-token-content']).toBeUndefined();
    expect(up.headers.forwarded).toMatch(/^for=client;proto=http, for=[^;]+;host=terminus\.example;proto=https;by=_svc-pep$/);
  });

  test('PoPP not required, a client-sent svc-popp-token-content and no PoPP: neither reaches the upstream', async () => {
    await call(h, t, 'GET', '/Slot', { headers: { 'svc-popp-token-content': 'FAKE' } });
    expect(last().headers['svc-popp-token-content']).toBeUndefined();
    expect(last().headers.popp).toBeUndefined();
  });

  test('an upstream 500 with svc-cause: Proxy becomes our 500 error object, without svc-cause or the upstream body (A_26974-01)', async () => {
    const res = await call(h, t, 'GET', '/Slot/proxy-error');
    expect(res.status).toBe(500);
    expect(res.body.error).toBe('server_error');
    expect(res.headers['svc-cause']).toBeUndefined();
    expect(res.text).not.toContain('secret');
  });

  test('other upstream statuses pass through unchanged (404 for the client\'s re-discovery, A_28426)', async () => {
    const res = await call(h, t, 'GET', '/Slot/missing');
    expect(res.status).toBe(404);
  });

  test('requests the guard refuses never reach the upstream', async () => {
    const before = upstream.requests.length;
    const res = await call(h, t, 'GET', '/Slot', { proof: null });
    expect(res.status).toBe(401);
    expect(upstream.requests.length).toBe(before);
  });

  test('a transaction body read for the scope check is forwarded intact', async () => {
    const bundle = { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Slot?status=free' } }] };
    const res = await call(h, t, 'POST', '', { body: bundle });
    expect(res.status).toBe(200);
    expect(last().method).toBe('POST');
    expect(last().url).toBe('/base/fhir');
    expect(JSON.parse(last().body)).toEqual(bundle);
  });

  test('GET /fhir/metadata is proxied without credentials', async () => {
    const res = await call(h, t, 'GET', '/metadata', { scheme: null, proof: null });
    expect(res.status).toBe(200);
    expect(last().url).toBe('/base/fhir/metadata');
    expect(last().headers['svc-user-info']).toBeUndefined();
  });
  describe('what the enforcement point cannot read is never forwarded on trust (fails closed)', () => {
    const bundle = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'p1', active: true }, request: { method: 'PUT', url: 'Patient/p1' } }] });
    const rows: [string, string, string][] = [
      ['a readable transaction (the baseline)', bundle, 'application/fhir+json'],
      ['a transaction labelled with another charset', bundle, 'application/fhir+json; charset=iso-8859-1'],
      ['a transaction with a repeated key', bundle.replace('"type":"transaction"', '"type":"transaction","type":"transaction"'), 'application/fhir+json'],
      ['a transaction that is not JSON', `${bundle}}`, 'application/fhir+json'],
    ];
    test.each(rows)('%s: 403 insufficient_scope for a requestor (Patient.cr), nothing reaches the upstream', async (_name, body, contentType) => {
      const before = upstream.requests.length;
      const res = await call(h, t, 'POST', '', { body, contentType });
      expect([res.status, res.body.error]).toEqual([403, 'insufficient_scope']);
      expect(upstream.requests.length).toBe(before);
    });

    test.each([
      ['an operation the embedded layer does not know', 'POST', '/Patient/$everything'],
      ['a path that does not route', 'GET', '/Patient/p1/x/y/z'],
      ['a method the embedded layer does not route', 'POST', '/metadata'],
    ])('%s: the upstream might run it, so it needs every scope (403), nothing forwarded', async (_name, method, path) => {
      const before = upstream.requests.length;
      const res = await call(h, t, method, path, method === 'POST' ? { body: { resourceType: 'Parameters' } } : {});
      expect([res.status, res.body.error]).toEqual([403, 'insufficient_scope']);
      expect(upstream.requests.length).toBe(before);
    });

    test('a search form that cannot be read: 403, nothing forwarded', async () => {
      const before = upstream.requests.length;
      // `_revinclude=Appointment:slot&x=<0xFF>`: not UTF-8, so the enforcement point cannot see the _revinclude.
      const form = Buffer.concat([Buffer.from('_revinclude=Appointment:slot&x='), Buffer.from([0xff])]);
      const res = await request(h.app)
        .post('/fhir/Slot/_search')
        .set('Authorization', `DPoP ${t.accessToken}`)
        .set('DPoP', await proofFor(h, t.dpopKey, 'POST', '/Slot/_search', t.accessToken))
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .serialize(((raw: Buffer) => raw) as unknown as (obj: unknown) => string) // as bytes: superagent would encode a Buffer as a form of its own
        .send(form);
      expect([res.status, res.body.error]).toEqual([403, 'insufficient_scope']);
      expect(upstream.requests.length).toBe(before);
    });
  });

});

describe('proxy mode: an unreachable upstream', () => {
  test('answers 502 server_error', async () => {
    const gone = await loopbackServer((_r, res) => res.end());
    await gone.close();
    const h = await pepHarness({ env: { UPSTREAM_URL: `${gone.url}/fhir` } });
    try {
      const t = await institution(h, { telematikId: '1-PEP-PROXY-GONE' });
      const res = await call(h, t, 'GET', '/Slot');
      expect(res.status).toBe(502);
      expect(res.body.error).toBe('server_error');
    } finally {
      await h.close();
    }
  });
});
