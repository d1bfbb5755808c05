import crypto from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import request from 'supertest';
import { SoftwareCard } from '../../src/client/software-card';
import { generateEcKey } from '../../src/client/crypto';
import { createCardCa, devPkiFor, issueCard } from '../../src/guard/pki/dev-pki';
import { decodeHeader, decodePayload, exchange, guardHarness, nowSec, tamperPayload, type ExchangeOverrides, type Harness } from './helpers/harness';

const REQUESTOR_SCOPES =
  'system/CodeSystem.rs system/Schedule.rs system/Slot.rs system/HealthcareService.rs system/Practitioner.rs system/Patient.cr system/Appointment.crus system/Subscription.cruds';

let h: Harness;
beforeAll(async () => {
  h = await guardHarness({ env: { REPOSITORY_OWNERS: '1-OWNER-PRAXIS' } });
});
afterAll(() => h.close());

describe('a successful token exchange', () => {
  test('answers a token response with a DPoP-bound ES256 at+jwt (RFC 9068)', async () => {
    const { res, client, dpopKey } = await exchange(h, { telematikId: '1-TEST-PRAXIS', professionOid: '1.2.276.0.76.4.50' });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toMatchObject({
      token_type: 'DPoP',
      expires_in: 300,
      scope: REQUESTOR_SCOPES,
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      refresh_expires_in: 86400,
    });
    expect(typeof res.body.refresh_token).toBe('string');
    const at = res.body.access_token as string;
    expect(decodeHeader(at)).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    const jwks = (await request(h.app).get('/svc/v1/jwks')).body;
    const { payload } = await jwtVerify(at, createLocalJWKSet(jwks), { issuer: h.publicUrl, audience: h.resource, typ: 'at+jwt' });
    expect(payload).toMatchObject({
      sub: '1-TEST-PRAXIS',
      client_id: client.clientId,
      aud: [h.resource],
      scope: REQUESTOR_SCOPES,
      cnf: { jkt: dpopKey.jkt },
      profession_oid: '1.2.276.0.76.4.50',
      common_name: 'Praxis 1-TEST-PRAXIS',
      organization_name: 'Praxis 1-TEST-PRAXIS',
      product_id: 'terminus-client',
      product_version: '0.1.0',
      platform: 'linux',
    });
    expect(payload.exp! - payload.iat!).toBe(300);
    expect(typeof payload.jti).toBe('string');
    expect(typeof payload.sid).toBe('string');
  });

  test('moves the client from pending_attestation to active', async () => {
    const { client } = await exchange(h);
    const r = await h.ctx.db.query<{ status: string; platform: string }>('SELECT status, platform FROM guard_client WHERE client_id = $1', [client.clientId]);
    expect(r.rows[0]).toEqual({ status: 'active', platform: 'linux' });
  });

  test('gives REPOSITORY_OWNERS system/*.cruds in addition', async () => {
    const { res } = await exchange(h, { telematikId: '1-OWNER-PRAXIS' });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe(`${REQUESTOR_SCOPES} system/*.cruds`);
  });

  test('grants a requested subset of the allowed scopes', async () => {
    const { res } = await exchange(h, { form: { scope: 'system/Slot.rs system/Appointment.crus' } });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('system/Slot.rs system/Appointment.crus');
  });

  test('lets an owner ask for a scope covered by system/*.cruds', async () => {
    const { res } = await exchange(h, { telematikId: '1-OWNER-PRAXIS', form: { scope: 'system/Schedule.cruds' } });
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe('system/Schedule.cruds');
  });

  test.each([
    ['brainpoolP256r1 card signing BP256R1', 'brainpoolP256r1'],
    ['RSA card signing PS256', 'rsa'],
  ] as const)('accepts a %s', async (_n, curve) => {
    const c = issueCard(devPkiFor(h.ctx).ca, { telematikId: `1-CARD-${curve}`, curve });
    const card = new SoftwareCard(c.certPem, c.keyPem);
    const { res } = await exchange(h, { card });
    expect(res.status).toBe(200);
    expect(decodePayload(res.body.access_token).sub).toBe(`1-CARD-${curve}`);
  });
});

describe('token exchange parameters', () => {
  test.each<[string, number, string, ExchangeOverrides]>([
    ['subject_token missing', 400, 'invalid_request', { form: { subject_token: undefined } }],
    ['subject_token_type wrong', 400, 'invalid_request', { form: { subject_token_type: 'urn:ietf:params:oauth:token-type:saml2' } }],
    ['resource missing', 400, 'invalid_request', { form: { resource: undefined } }],
    ['resource of another server', 400, 'invalid_target', { form: { resource: 'https://evil.example.com/api' } }],
    ['grant_type missing', 400, 'invalid_request', { form: { grant_type: undefined } }],
    ['grant_type unsupported', 400, 'unsupported_grant_type', { form: { grant_type: 'client_credentials' } }],
    ['scope malformed', 400, 'invalid_scope', { form: { scope: 'bad"scope' } }],
  ])('%s -> %i %s', async (_n, status, error, o) => {
    const { res } = await exchange(h, o);
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(error);
  });

  test('a JSON body instead of a form is 400 invalid_request', async () => {
    const res = await request(h.app).post('/svc/v1/token').send({ grant_type: 'refresh_token' });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_uri).toBe(`${h.publicUrl}/svc/v1/errors#invalid_request`);
  });

  test('a client registered without token exchange is 400 unauthorized_client', async () => {
    const { registerClient } = await import('./helpers/harness');
    const client = await registerClient(h, ['refresh_token']);
    const { res } = await exchange(h, { client });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('unauthorized_client');
  });
});

describe('the subject token: a failed check is 403 access_denied', () => {
  const DAY = 86_400_000;
  test.each<[string, () => ExchangeOverrides]>([
    ['card from an untrusted CA', () => ({ card: cardFrom(createCardCa({ commonName: 'Evil CA' }), { telematikId: '1-EVIL' }) })],
    ['expired card certificate', () => ({ card: cardFrom(devPkiFor(h.ctx).ca, { telematikId: '1-OLD', notBefore: new Date(Date.now() - 400 * DAY), notAfter: new Date(Date.now() - DAY) }) })],
    ['card not yet valid', () => ({ card: cardFrom(devPkiFor(h.ctx).ca, { telematikId: '1-NEW', notBefore: new Date(Date.now() + DAY), notAfter: new Date(Date.now() + 400 * DAY) }) })],
    ['card without admission extension', () => ({ card: cardFrom(devPkiFor(h.ctx).ca, { telematikId: '1-NOADM', admission: false }), subject: { claims: { sub: '1-NOADM' } } })],
    ['sub is not the Telematik-ID of the card', () => ({ subject: { claims: { sub: '1-SOMEONE-ELSE' } } })],
    ['iss is not the client_id', () => ({ subject: { claims: { iss: 'another-client' } } })],
    ['aud lacks the token endpoint', () => ({ subject: { claims: { aud: ['https://other.example/token'] } } })],
    ['nonce is not the nonce of the DPoP proof', () => ({ subject: { claims: { nonce: 'AAAAAAAAAAAAAAAAAAAAAA' } } })],
    ['client_key.jkt is not the registered key', () => ({ subject: { claims: { client_key: { jkt: 'x'.repeat(43) } } } })],
    ['dpop_key.jkt is not the DPoP proof key (RFC 9449 §10 dpop_jkt analogue)', () => ({ subject: { claims: { dpop_key: { jkt: 'y'.repeat(43) } } } })],
    ['expired', () => ({ subject: { now: nowSec(h) - 600 } })],
    ['exp missing', () => ({ subject: { claims: { exp: undefined } } })],
    ['jti missing', () => ({ subject: { claims: { jti: undefined } } })],
    ['alg none', () => ({ subject: { header: { alg: 'none' } } })],
    ['alg ES256 over a brainpool key', () => ({ card: cardFrom(devPkiFor(h.ctx).ca, { telematikId: '1-TEST-PRAXIS', curve: 'brainpoolP256r1' }), subject: { header: { alg: 'ES256' } } })],
    ['x5c missing', () => ({ subject: { header: { x5c: undefined } } })],
    ['x5c not certificates', () => ({ subject: { header: { x5c: ['AAAA'] } } })],
  ])('%s', async (_n, build) => {
    const { res } = await exchange(h, build());
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('access_denied');
    expect(res.body.access_token).toBeUndefined();
  });

  test('jti changed without re-signing (ZETA UC10 row 25) is 403 access_denied', async () => {
    const client = await (await import('./helpers/harness')).registerClient(h);
    const dpopKey = await generateEcKey();
    const nonce = (await request(h.app).get('/svc/v1/nonce')).body.nonce;
    const { createSubjectToken } = await import('../../src/client/software-card');
    const { testCard } = await import('./helpers/get-token');
    const card = testCard(h.ctx, { telematikId: '1-TEST-PRAXIS' });
    const token = createSubjectToken(card, { clientId: client.clientId, telematikId: '1-TEST-PRAXIS', tokenEndpoint: h.urls.token, nonce, clientJkt: client.clientKey.jkt, dpopJkt: dpopKey.jkt, now: nowSec(h) });
    const tampered = tamperPayload(token, (p) => (p.jti = crypto.randomUUID()));
    const { res } = await exchange(h, { client, dpopKey, nonce, subject: { raw: tampered } });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('access_denied');
    expect(res.body.error_description).toMatch(/signature/);
  });

  test('a subject token that is not a JWT is 400 invalid_request', async () => {
    const { res } = await exchange(h, { subject: { raw: 'garbage' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
  });
});

describe('the client statement (software posture): ZETA UC06 expects 400', () => {
  test.each<[string, (s: Record<string, unknown>) => unknown]>([
    ['empty statement {} (row 15)', () => ({})],
    ['statement missing', () => undefined],
    ['platform linux -> windows (row 16)', (s) => ({ ...s, platform: 'windows' })],
    ['attestation_challenge replaced (row 22)', (s) => ({ ...s, posture: { ...(s.posture as object), attestation_challenge: 'A'.repeat(43) } })],
    ['TPM posture with a junk quote (row 23)', (s) => ({ ...s, posture_type: 'tpm', posture: { tpm_quote: 'junk' } })],
    ['sub is not the client_id', (s) => ({ ...s, sub: 'other' })],
    ['platform unknown', (s) => ({ ...s, platform: 'amiga' })],
    ['attestation_timestamp stale', (s) => ({ ...s, attestation_timestamp: nowSec(h) - 3600 })],
    ['attestation_timestamp in the future', (s) => ({ ...s, attestation_timestamp: nowSec(h) + 3600 })],
    ['posture without product_id', (s) => ({ ...s, posture: { ...(s.posture as object), product_id: undefined } })],
    ['public_key of another key', (s) => ({ ...s, posture: { ...(s.posture as object), public_key: crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64') } })],
    ['public_key not a key', (s) => ({ ...s, posture: { ...(s.posture as object), public_key: 'bm90IGEga2V5' } })],
  ])('%s -> 400 invalid_request', async (_n, change) => {
    const { res } = await exchange(h, { statement: change });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
  });

  test('a client that attested as linux cannot come back as windows', async () => {
    const first = await exchange(h);
    expect(first.res.status).toBe(200);
    const again = await exchange(h, { client: first.client, statement: (s) => ({ ...s, platform: 'windows', posture: { ...(s.posture as object), os: 'Windows 11' } }) });
    expect(again.res.status).toBe(400);
    expect(again.res.body.error_description).toMatch(/platform/);
  });
});

describe('policy (embedded engine over policies/default.json)', () => {
  test.each<[string, ExchangeOverrides, string]>([
    ['professionOID 1.2.276.0.76.4.999', { telematikId: '1-VET', professionOid: '1.2.276.0.76.4.999' }, 'User profession is not allowed'],
    ['scope invalid_scope_xyz', { form: { scope: 'invalid_scope_xyz' } }, 'One or more requested scopes are not allowed'],
    ['a requestor asking for system/*.cruds', { form: { scope: 'system/*.cruds' } }, 'One or more requested scopes are not allowed'],
  ])('denies %s with 403 access_denied and reasons', async (_n, o, reason) => {
    const { res } = await exchange(h, o);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('access_denied');
    expect(res.body.reasons).toEqual([reason]);
    expect(res.body.error_description).toContain(reason);
    expect(res.body.access_token).toBeUndefined();
    expect(res.body.refresh_token).toBeUndefined();
  });

  test.each(['1.2.276.0.76.4.50', '1.2.276.0.76.4.51', '1.2.276.0.76.4.52', '1.2.276.0.76.4.53', '1.2.276.0.76.4.54', '1.2.276.0.76.4.55'])(
    'admits professionOID %s by default',
    async (oid) => {
      const { res } = await exchange(h, { telematikId: `1-P-${oid}`, professionOid: oid });
      expect(res.status).toBe(200);
    },
  );
});

function cardFrom(ca: { certPem: string; keyPem: string }, spec: Parameters<typeof issueCard>[1]): SoftwareCard {
  const c = issueCard(ca, spec);
  return new SoftwareCard(c.certPem, c.keyPem);
}
