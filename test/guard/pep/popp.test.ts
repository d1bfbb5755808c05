import crypto from 'node:crypto';
import { exportJWK } from 'jose';
import type { TestToken } from '../helpers/get-token';
import { call, institution, nowSec, pepHarness, type PepHarness } from './helpers';
import { loopbackServer, type LoopbackServer } from './loopback';

const TYP = 'vnd.telematik.popp+jwt';
const b64 = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');

function sign(header: Record<string, unknown>, payload: Record<string, unknown> | string, key: crypto.KeyObject): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

/**
 * Proof of patient presence on the routes that require it (POPP_REQUIRED_ROUTES),
 * verified against the PoPP issuer's JWKS served by a real HTTP server on loopback.
 * docs/requirements.md#dpop-and-the-enforcement-point (PoPP).
 */
describe('PoPP', () => {
  const issuerKey = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const foreignKey = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  let jwksFailing = false;
  let jwks: LoopbackServer;
  let upstream: LoopbackServer;
  let h: PepHarness;
  let t: TestToken;
  let owner: TestToken;
  beforeAll(async () => {
    const pub = await exportJWK(crypto.createPublicKey(issuerKey));
    jwks = await loopbackServer((_req, res) => {
      if (jwksFailing) {
        res.writeHead(500).end('down');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [{ ...pub, kid: 'popp-1', alg: 'ES256', use: 'sig' }] }));
    });
    upstream = await loopbackServer((_req, res) => res.writeHead(200, { 'content-type': 'application/fhir+json' }).end('{"resourceType":"Bundle","type":"searchset"}'));
    h = await pepHarness({ env: { UPSTREAM_URL: `${upstream.url}/fhir`, POPP_JWKS_URL: `${jwks.url}/jwks`, POPP_REQUIRED_ROUTES: 'Patient, Appointment/$book', REPOSITORY_OWNERS: '1-PEP-POPP-OWNER' } });
    t = await institution(h, { telematikId: '1-PEP-POPP' });
  });
  afterAll(async () => {
    await h.close();
    await Promise.all([jwks.close(), upstream.close()]);
  });

  const claims = (extra: Record<string, unknown> = {}) => ({
    version: '1.0.0',
    iss: 'https://popp.example',
    iat: nowSec(h) - 60,
    proofMethod: 'ehc-practitioner-trustedchannel',
    patientProofTime: nowSec(h) - 120,
    patientId: 'X110411675',
    insurerId: '109500969',
    actorId: '1-PEP-POPP',
    actorProfessionOid: '1.2.276.0.76.4.50',
    ...extra,
  });
  const popp = (extra: Record<string, unknown> = {}, header: Record<string, unknown> = {}, key = issuerKey) => sign({ typ: TYP, alg: 'ES256', kid: 'popp-1', ...header }, claims(extra), key);
  const last = () => upstream.requests[upstream.requests.length - 1];

  test('a route that requires PoPP, called without one → 400', async () => {
    const res = await call(h, t, 'GET', '/Patient/p1');
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    const book = await call(h, t, 'POST', '/Appointment/$book', { body: { resourceType: 'Appointment' } });
    expect(book.status).toBe(400);
  });

  test('a valid PoPP → 200; the JWKS was fetched; svc-popp-token-content is the payload verbatim within 450 bytes', async () => {
    const token = popp();
    const res = await call(h, t, 'POST', '/Patient', { body: { resourceType: 'Patient' }, headers: { PoPP: token } });
    expect(res.status).toBe(200);
    expect(jwks.requests.map((r) => r.url)).toContain('/jwks');
    const content = last().headers['svc-popp-token-content'] as string;
    expect(content).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(content.length).toBeLessThanOrEqual(450);
    expect(Buffer.from(content, 'base64url').toString('utf8')).toBe(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
    expect(last().headers.popp).toBeUndefined();
    expect(JSON.parse(Buffer.from(last().headers['svc-user-info'] as string, 'base64url').toString('utf8')).identifier).toBe('1-PEP-POPP');
  });

  test('routes outside POPP_REQUIRED_ROUTES need none', async () => {
    expect((await call(h, t, 'GET', '/Slot')).status).toBe(200);
  });

  const batch = (...entries: [string, string, unknown?][]) => ({
    resourceType: 'Bundle',
    type: 'batch',
    entry: entries.map(([method, url, resource]) => ({ request: { method, url }, ...(resource ? { resource } : {}) })),
  });

  // Review hole 3: the outer route of a Bundle is `POST /`; its entries are what runs.
  const batches: [string, unknown][] = [
    ['a batch entry POST Appointment/$book', batch(['GET', 'Slot/s1'], ['POST', 'Appointment/$book', { resourceType: 'Parameters' }])],
    ['a batch entry GET Patient/x', batch(['GET', 'Slot/s1'], ['GET', 'Patient/x'])],
    ['a transaction entry creating a Patient', { ...batch(['POST', 'Patient', { resourceType: 'Patient' }]), type: 'transaction' }],
  ];

  test.each(batches)('%s needs a PoPP: without one → 400, with one → 200', async (_name, bundle) => {
    const without = await call(h, t, 'POST', '/', { body: bundle });
    expect([without.status, without.body.error]).toEqual([400, 'invalid_request']);
    const withPopp = await call(h, t, 'POST', '/', { body: bundle, headers: { PoPP: popp() } });
    expect(withPopp.status).toBe(200);
  });

  test('a batch of Slot reads needs none', async () => {
    expect((await call(h, t, 'POST', '/', { body: batch(['GET', 'Slot/s1'], ['GET', 'Slot?status=free']) })).status).toBe(200);
  });

  // A requestor may not search Patients (403 first); an owner's token passes the scope check, and the search still reaches Patient.
  const includes: [string, string, string, string | undefined][] = [
    ['_include=Appointment:patient', 'GET', '/Appointment?_include=Appointment:patient', undefined],
    ['_include of every actor type (Patient among them)', 'GET', '/Appointment?_include=Appointment:actor', undefined],
    ['a chain through Patient', 'GET', '/Appointment?patient.name=Privat', undefined],
    ['_has:Patient', 'GET', '/Practitioner?_has:Patient:general-practitioner:name=X', undefined],
    ['a batch entry with _revinclude of Patients', 'POST', '/', JSON.stringify(batch(['GET', 'RelatedPerson?_revinclude=Patient:link']))],
    ['_include in a POST _search form', 'POST', '/Appointment/_search', '_include=Appointment:patient'],
    ['a nested batch (not followed, needs one)', 'POST', '/', JSON.stringify(batch(['POST', '/', batch(['GET', 'Slot/s1'])]))],
  ];

  test.each(includes)('%s needs a PoPP: without one → 400, with one → 200', async (_name, method, path, body) => {
    owner ??= await institution(h, { telematikId: '1-PEP-POPP-OWNER' });
    const contentType = method === 'POST' && path !== '/' ? 'application/x-www-form-urlencoded' : undefined;
    const without = await call(h, owner, method, path, { body, contentType });
    expect([without.status, without.body.error]).toEqual([400, 'invalid_request']);
    const withPopp = await call(h, owner, method, path, { body, contentType, headers: { PoPP: popp({ actorId: '1-PEP-POPP-OWNER' }) } });
    expect(withPopp.status).toBe(200);
  });

  test('_include limited to a type outside POPP_REQUIRED_ROUTES needs none', async () => {
    expect((await call(h, t, 'GET', '/Appointment?_include=Appointment:actor:Practitioner')).status).toBe(200);
  });

  const refused: [string, () => string, string][] = [
    ['iat=1701432000', () => popp({ iat: 1701432000 }), 'the PoPP iat is too old'],
    ['patientProofTime=1701432000', () => popp({ patientProofTime: 1701432000 }), 'the PoPP patientProofTime is too old'],
    ['actorId=evil_client', () => popp({ actorId: 'evil_client' }), 'the PoPP actorId is not the institution of the access token'],
    ['signed with a foreign key, kid of the issuer', () => popp({}, {}, foreignKey), 'the PoPP signature does not verify'],
    ['signed with a foreign key, its own jwk in the header', () => popp({}, { kid: 'attacker', jwk: { kty: 'EC' } }, foreignKey), 'the PoPP is not signed with a key of the PoPP issuer'],
    ['iat in the future', () => popp({ iat: nowSec(h) + 3600 }), 'the PoPP iat is in the future'],
    ['patientProofTime missing', () => popp({ patientProofTime: undefined }), 'the PoPP has no numeric patientProofTime'],
    ['typ JWT', () => popp({}, { typ: 'JWT' }), 'the PoPP typ must be vnd.telematik.popp+jwt'],
    ['alg ES384', () => popp({}, { alg: 'ES384' }), 'the PoPP must be signed with ES256'],
    ['not a JWS', () => 'not-a-popp', 'the PoPP is not a compact JWS'],
    ['a payload too large to forward (over 450 bytes)', () => popp({ padding: 'x'.repeat(400) }), 'the PoPP payload exceeds the 450-byte header limit'],
  ];

  test.each(refused)('%s → 403', async (_name, build, description) => {
    const res = await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: build() } });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('invalid_popp');
    expect(res.body.error_description).toBe(description);
  });

  test('two PoPP headers → 403', async () => {
    const res = await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: [popp(), popp()] } });
    expect(res.status).toBe(403);
  });

  test('the JWKS is refetched after 5 minutes, not before', async () => {
    const before = jwks.requests.length;
    expect((await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: popp() } })).status).toBe(200);
    expect(jwks.requests.length).toBe(before);
    h.ctx.clock.advance(301_000);
    t = await institution(h, { telematikId: '1-PEP-POPP' });
    expect((await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: popp() } })).status).toBe(200);
    expect(jwks.requests.length).toBe(before + 1);
  });

  test('the issuer fails; the cached set serves for 24 h after the last good fetch, then nothing verifies (403)', async () => {
    jwksFailing = true;
    h.ctx.clock.advance(23 * 3600_000);
    t = await institution(h, { telematikId: '1-PEP-POPP' });
    const within = await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: popp() } });
    expect(within.status).toBe(200);
    expect(jwks.requests[jwks.requests.length - 1].url).toBe('/jwks');
    h.ctx.clock.advance(3600_000 + 1000);
    t = await institution(h, { telematikId: '1-PEP-POPP' });
    const stale = await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: popp() } });
    expect(stale.status).toBe(403);
    expect(stale.body.error).toBe('invalid_popp');
    jwksFailing = false;
    h.ctx.clock.advance(301_000);
    t = await institution(h, { telematikId: '1-PEP-POPP' });
    expect((await call(h, t, 'GET', '/Patient/p1', { headers: { PoPP: popp() } })).status).toBe(200);
  });
});
