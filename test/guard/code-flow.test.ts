/**
 * Authorization code with PAR and PKCE for patient apps
 * (docs/requirements.md#patients-authorization-code-flow), against a real node-oidc-provider as the
 * upstream IdP (PAR at the IdP, private_key_jwt, PKCE, id_tokens signed ES256 and encrypted
 * ECDH-ES/A256GCM), driven through its login and consent forms. Then the patient's tokens at the
 * enforcement point: `$book` for themselves, nothing of anyone else.
 */
import type { Appointment } from '@medplum/fhirtypes';
import request from 'supertest';
import { createDpopProof, generateEcKey, type EcKey } from '../../src/client/crypto';
import { endpoints } from '../../src/guard/settings';
import { bookingFixture, freeSlot, proposal, put, type BookingFixture } from '../booking/builders';
import { APP_REDIRECT, browse, par, pkce, providerEntry, providersFile, redeemCode, registerPatientApp, serverKeys, startIdp, type Idp, type PatientApp } from './helpers/code-flow';
import { decodePayload } from './helpers/harness';

const PUBLIC_URL = 'http://localhost:8080';
const ERIKA = 'X485231029';
const MAX = 'A123456789';
const DOWN_IDP = 'http://127.0.0.1:9';

let idp: Idp;
/** A second IdP without PAR, signing but not encrypting id_tokens, our client with a client secret. */
let plainIdp: Idp;
let f: BookingFixture;
let h: { app: BookingFixture['app']; publicUrl: string; urls: ReturnType<typeof endpoints>; now: () => number; idpIss: string };
let patientApp: PatientApp;

beforeAll(async () => {
  const keys = serverKeys();
  idp = await startIdp({ clientId: 'terminus', redirectUri: `${PUBLIC_URL}/svc/v1/redirect`, keys, claims: { [ERIKA]: { name: 'Erika Mustermann' } } });
  plainIdp = await startIdp({ clientId: 'terminus-plain', redirectUri: `${PUBLIC_URL}/svc/v1/redirect`, keys, par: false, encrypt: false, secret: 'a-long-client-secret-for-the-test-idp' });
  const file = providersFile(keys, [
    providerEntry(idp.issuer, 'terminus'),
    { iss: plainIdp.issuer, name: 'Plain IdP', client_id: 'terminus-plain', client_auth: 'client_secret_post', secret: 'a-long-client-secret-for-the-test-idp' },
    // Nothing listens there: an IdP that is down.
    { iss: DOWN_IDP, name: 'Down IdP', client_id: 'terminus', client_auth: 'client_secret_basic', secret: 'unused-secret' },
  ]);
  f = await bookingFixture({ env: { GUARD_ENFORCEMENT: 'on', OIDC_PROVIDERS_FILE: file, PUBLIC_URL } });
  h = { app: f.app, publicUrl: PUBLIC_URL, urls: endpoints(PUBLIC_URL), now: () => Math.floor(f.ctx.now().getTime() / 1000), idpIss: idp.issuer };
  patientApp = await registerPatientApp(h);
});

afterAll(async () => {
  await f?.close();
  await idp?.close();
  await plainIdp?.close();
});

/** PAR, then the browser through /authorize, the IdP's forms and the redirection endpoint, to the app's redirect URI. */
async function login(account: string, o: { app?: PatientApp; form?: Record<string, string | undefined> } = {}) {
  const app = o.app ?? patientApp;
  const { verifier, challenge } = pkce();
  const pushed = await par(h, app, challenge, o.form);
  expect(pushed.status).toBe(201);
  const start = `/svc/v1/authorize?client_id=${encodeURIComponent(app.clientId)}&request_uri=${encodeURIComponent(pushed.body.request_uri)}`;
  const visited: URL[] = [];
  const landed = await browse(f.app, PUBLIC_URL, start, account, visited);
  return { app, verifier, landed, visited };
}

async function tokensFor(account: string, app = patientApp) {
  const { verifier, landed } = await login(account, { app });
  const res = await redeemCode(h, app, landed.searchParams.get('code')!, verifier);
  expect(res.status).toBe(200);
  return { body: res.body as { access_token: string; refresh_token: string; scope: string; token_type: string }, dpopKey: app.dpopKey, code: landed.searchParams.get('code')!, verifier };
}

/** A FHIR request through the enforcement point with the token's DPoP key. */
async function fhir(method: string, path: string, token: string, dpopKey: EcKey, body?: unknown): Promise<request.Response> {
  const proof = await createDpopProof(dpopKey, { method, url: `${PUBLIC_URL}${path}`, accessToken: token, iat: h.now() });
  const r = request(f.app)[method.toLowerCase() as 'get' | 'post' | 'patch'](path).set('Authorization', `DPoP ${token}`).set('DPoP', proof);
  return body === undefined ? r : r.set('Content-Type', 'application/fhir+json').send(JSON.stringify(body));
}

let n = 0;
async function slotProposal(): Promise<Appointment> {
  n += 1;
  const s = { id: `code-flow-slot-${n}`, start: `2027-09-${String(n).padStart(2, '0')}T09:00:00Z`, end: `2027-09-${String(n).padStart(2, '0')}T09:20:00Z` };
  await put(f, freeSlot(s.id, s.start, s.end));
  return proposal({ start: s.start, end: s.end, slot: [{ reference: `Slot/${s.id}` }], participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }] });
}

describe('the full flow', () => {
  test('GET /openid-providers lists the configured IdP', async () => {
    const res = await request(f.app).get('/svc/v1/openid-providers');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { iss: idp.issuer, name: 'Test IdP', type: 'oidc' },
      { iss: plainIdp.issuer, name: 'Plain IdP', type: 'oidc' },
      { iss: DOWN_IDP, name: 'Down IdP', type: 'oidc' },
    ]);
  });

  test('with two IdPs PAR needs idp_iss; an IdP without PAR gets the parameters in the URL, a client secret and a plain signed id_token', async () => {
    const missing = await par(h, patientApp, pkce().challenge, { idp_iss: undefined });
    expect(missing.status).toBe(400);
    expect(missing.body.error_description).toMatch(/idp_iss is required/);
    const pushed = await par(h, patientApp, pkce().challenge, { idp_iss: plainIdp.issuer });
    const toIdp = await request(f.app).get(`/svc/v1/authorize?client_id=${patientApp.clientId}&request_uri=${encodeURIComponent(pushed.body.request_uri)}`);
    const params = new URL(toIdp.headers.location).searchParams;
    expect(params.get('code_challenge_method')).toBe('S256');
    expect(params.get('nonce')).toEqual(expect.any(String));
    expect(params.get('redirect_uri')).toBe(`${PUBLIC_URL}/svc/v1/redirect`);
    const t = await login(MAX, { form: { idp_iss: plainIdp.issuer } });
    const res = await redeemCode(h, patientApp, t.landed.searchParams.get('code')!, t.verifier);
    expect(res.status).toBe(200);
    expect(decodePayload(res.body.access_token)).toMatchObject({ sub: MAX, idp: plainIdp.issuer });
  });

  test('PAR → authorize → IdP login and consent → our code at the app with its state and our iss → DPoP-bound patient tokens', async () => {
    const { verifier, landed } = await login(ERIKA);
    expect(`${landed.origin}${landed.pathname}`).toBe(APP_REDIRECT);
    expect(landed.searchParams.get('state')).toBe('app-state-1');
    expect(landed.searchParams.get('iss')).toBe(PUBLIC_URL);
    expect(landed.searchParams.get('error')).toBeNull();
    const res = await redeemCode(h, patientApp, landed.searchParams.get('code')!, verifier);
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toMatchObject({ token_type: 'DPoP', scope: 'patient/Appointment.crus patient/Slot.rs patient/Patient.r', refresh_token: expect.any(String) });
    const at = decodePayload(res.body.access_token);
    expect(at).toMatchObject({ sub: ERIKA, kvnr: ERIKA, idp: idp.issuer, client_id: patientApp.clientId, cnf: { jkt: patientApp.dpopKey.jkt } });
  });

  test("a patient books for themselves through the guard, reads it, and cannot read another patient's", async () => {
    const erika = await tokensFor(ERIKA);
    const booked = await fhir('POST', '/fhir/Appointment/$book', erika.body.access_token, erika.dpopKey, await slotProposal());
    expect(booked.status).toBe(201);
    expect(booked.body.participant).toContainEqual(expect.objectContaining({ actor: expect.objectContaining({ reference: 'Patient/Patient-Read-Example' }) }));
    expect((await fhir('GET', `/fhir/Appointment/${booked.body.id}`, erika.body.access_token, erika.dpopKey)).status).toBe(200);
    const mine = await fhir('GET', '/fhir/Appointment', erika.body.access_token, erika.dpopKey);
    expect(mine.body.entry.map((e: { resource: Appointment }) => e.resource.id)).toEqual([booked.body.id]);

    const otherApp = await registerPatientApp(h);
    const max = await tokensFor(MAX, otherApp);
    expect((await fhir('GET', `/fhir/Appointment/${booked.body.id}`, max.body.access_token, max.dpopKey)).status).toBe(404);
    expect((await fhir('GET', '/fhir/Patient/Patient-Read-Example', max.body.access_token, max.dpopKey)).status).toBe(404);
    const cancel = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };
    expect((await fhir('PATCH', `/fhir/Appointment/${booked.body.id}`, max.body.access_token, max.dpopKey, cancel)).status).toBe(404);
    const forErika = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: await slotProposal() }, { name: 'patient', resource: { resourceType: 'Patient', identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: ERIKA }] } }] };
    const denied = await fhir('POST', '/fhir/Appointment/$book', max.body.access_token, max.dpopKey, forErika);
    expect(denied.status).toBe(403);
    expect(denied.body.resourceType).toBe('OperationOutcome');
    // Patient scopes reach no further than the patient's part: no Patient search, no Subscriptions.
    const search = await fhir('GET', '/fhir/Patient', max.body.access_token, max.dpopKey);
    expect(search.status).toBe(403);
    expect(search.headers['www-authenticate']).toMatch(/insufficient_scope/);
    expect((await fhir('GET', '/fhir/Subscription', max.body.access_token, max.dpopKey)).status).toBe(403);
    expect((await fhir('PATCH', `/fhir/Appointment/${booked.body.id}`, erika.body.access_token, erika.dpopKey, cancel)).status).toBe(200);
  });
});

describe('the app side: PAR and the authorization endpoint', () => {
  test('/authorize without a pushed request is 400 invalid_request (JSON, no redirect)', async () => {
    const res = await request(f.app).get(`/svc/v1/authorize?client_id=${patientApp.clientId}&response_type=code&redirect_uri=${encodeURIComponent(APP_REDIRECT)}`);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.headers.location).toBeUndefined();
  });

  test.each([
    ['plain PKCE', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no PKCE', { code_challenge: undefined, code_challenge_method: undefined }, 'invalid_request'],
    ['an unregistered redirect_uri', { redirect_uri: 'https://evil.test/cb/app' }, 'invalid_request'],
    ['an unknown IdP', { idp_iss: 'https://idp.unknown.test' }, 'invalid_request'],
    ['no state', { state: undefined }, 'invalid_request'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['a system scope', { scope: 'openid system/*.cruds' }, 'invalid_scope'],
    ['a request object', { request: 'eyJ.x.y' }, 'invalid_request'],
  ])('PAR with %s is 400 %s', async (_name, form, error) => {
    const res = await par(h, patientApp, pkce().challenge, form as Record<string, string | undefined>);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe(error);
  });

  test('PAR without client authentication is 401 invalid_client; a client without the grant is 400 unauthorized_client', async () => {
    const res = await par(h, patientApp, pkce().challenge, { client_assertion: undefined, client_assertion_type: undefined });
    expect([400, 401]).toContain(res.status);
    const tokenExchangeOnly = await registerPatientApp(h);
    await f.ctx.db.query("UPDATE guard_client SET grant_types = ARRAY['urn:ietf:params:oauth:grant-type:token-exchange'] WHERE client_id = $1", [tokenExchangeOnly.clientId]);
    const denied = await par(h, tokenExchangeOnly, pkce().challenge);
    expect(denied.status).toBe(400);
    expect(denied.body.error).toBe('unauthorized_client');
  });

  test('PAR answers 201 {request_uri, expires_in: 60}; the request_uri is single use', async () => {
    const pushed = await par(h, patientApp, pkce().challenge);
    expect(pushed.status).toBe(201);
    expect(pushed.body).toEqual({ request_uri: expect.stringMatching(/^urn:ietf:params:oauth:request_uri:/), expires_in: 60 });
    const url = `/svc/v1/authorize?client_id=${patientApp.clientId}&request_uri=${encodeURIComponent(pushed.body.request_uri)}`;
    const first = await request(f.app).get(url);
    expect(first.status).toBe(302);
    expect(first.headers.location.startsWith(`${idp.issuer}/`)).toBe(true);
    // The IdP got a pushed request of its own: only client_id and request_uri travel in the URL.
    expect([...new URL(first.headers.location).searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    const again = await request(f.app).get(url);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_request');
  });

  test('an IdP that cannot be reached sends the app temporarily_unavailable with its state', async () => {
    const pushed = await par(h, patientApp, pkce().challenge, { idp_iss: DOWN_IDP });
    const res = await request(f.app).get(`/svc/v1/authorize?client_id=${patientApp.clientId}&request_uri=${encodeURIComponent(pushed.body.request_uri)}`);
    expect(res.status).toBe(302);
    const landed = new URL(res.headers.location);
    expect(`${landed.origin}${landed.pathname}`).toBe(APP_REDIRECT);
    expect(landed.searchParams.get('error')).toBe('temporarily_unavailable');
    expect(landed.searchParams.get('state')).toBe('app-state-1');
  });

  test('a request_uri of another client, or after 60 s, is 400 invalid_request', async () => {
    const other = await registerPatientApp(h);
    const pushed = await par(h, patientApp, pkce().challenge);
    const wrongClient = await request(f.app).get(`/svc/v1/authorize?client_id=${other.clientId}&request_uri=${encodeURIComponent(pushed.body.request_uri)}`);
    expect(wrongClient.status).toBe(400);
    const late = await par(h, patientApp, pkce().challenge);
    f.ctx.clock.advance(61_000);
    try {
      const res = await request(f.app).get(`/svc/v1/authorize?client_id=${patientApp.clientId}&request_uri=${encodeURIComponent(late.body.request_uri)}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_request');
    } finally {
      f.ctx.clock.advance(-61_000);
    }
  });
});

describe('the redirection endpoint: what the IdP answers', () => {
  test('an unknown or tampered state is 400 invalid_request', async () => {
    const res = await request(f.app).get('/svc/v1/redirect?code=abc&state=tampered');
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.headers.location).toBeUndefined();
  });

  test.each([
    ['from another issuer', { claims: { iss: 'https://other-idp.test' } }, /^invalid_id_token: .*"iss"/],
    ['with a wrong nonce', { claims: { nonce: 'replayed-nonce' } }, /^invalid_id_token: .*"nonce"/],
    ['for another audience', { claims: { aud: 'someone-else' } }, /^invalid_id_token: .*"aud"/],
    ['expired', { claims: { exp: Math.floor(Date.now() / 1000) - 3600, iat: Math.floor(Date.now() / 1000) - 7200 } }, /^invalid_id_token: .*"exp"/],
    ['signed with a key not in the IdP JWKS', { foreignSigningKey: true }, /^invalid_id_token: the signature does not verify/],
    ['encrypted to a key we do not hold', { foreignEncryptionKey: true }, /does not decrypt/],
  ])('an id_token %s sends the app access_denied, with its state and our iss, and no code', async (_name, tamper, why) => {
    await idp.tamper(tamper);
    const { landed } = await login(ERIKA);
    expect(`${landed.origin}${landed.pathname}`).toBe(APP_REDIRECT);
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.get('error_description')).toMatch(why);
    expect(landed.searchParams.get('code')).toBeNull();
    expect(landed.searchParams.get('state')).toBe('app-state-1');
    expect(landed.searchParams.get('iss')).toBe(PUBLIC_URL);
  });

  test('a login whose id_token names no insurance number is access_denied no_kvnr', async () => {
    const { landed } = await login('alice');
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.get('error_description')).toMatch(/^no_kvnr/);
  });

  test("the IdP's answer replayed at the redirection endpoint (its state used) is 400 invalid_request", async () => {
    const { landed, visited } = await login(ERIKA);
    expect(landed.searchParams.get('code')).toEqual(expect.any(String));
    const answer = visited.find((u) => u.pathname === '/svc/v1/redirect')!;
    expect(answer.searchParams.get('iss')).toBe(idp.issuer);
    const replayed = await request(f.app).get(answer.pathname + answer.search);
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toBe('invalid_request');
  });
});

describe('the token endpoint: grant_type=authorization_code', () => {
  test('a wrong code_verifier is 400 invalid_grant', async () => {
    const { landed } = await login(ERIKA);
    const res = await redeemCode(h, patientApp, landed.searchParams.get('code')!, pkce().verifier);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });

  test('a redirect_uri other than the request\'s is 400 invalid_grant; a code of another client too', async () => {
    const { landed, verifier } = await login(ERIKA);
    const res = await redeemCode(h, patientApp, landed.searchParams.get('code')!, verifier, { redirect_uri: 'https://app.test/cb/other/app' });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
    const second = await login(ERIKA);
    const other = await registerPatientApp(h);
    const stolen = await redeemCode(h, other, second.landed.searchParams.get('code')!, second.verifier);
    expect(stolen.status).toBe(400);
    expect(stolen.body.error).toBe('invalid_grant');
  });

  test('a code redeemed twice: the second is 400 invalid_grant and the first tokens are revoked', async () => {
    const first = await tokensFor(ERIKA);
    expect((await fhir('GET', '/fhir/Appointment', first.body.access_token, first.dpopKey)).status).toBe(200);
    const again = await redeemCode(h, patientApp, first.code, first.verifier);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    expect((await fhir('GET', '/fhir/Appointment', first.body.access_token, first.dpopKey)).status).toBe(401);
  });

  test('a DPoP key other than the dpop_jkt named at PAR is 400 invalid_dpop_proof', async () => {
    const bound = await generateEcKey();
    const { landed, verifier } = await login(ERIKA, { form: { dpop_jkt: bound.jkt } });
    const res = await redeemCode(h, patientApp, landed.searchParams.get('code')!, verifier);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_dpop_proof');
  });

  test('a code redeemed after 60 s is 400 invalid_grant', async () => {
    const { landed, verifier } = await login(ERIKA);
    f.ctx.clock.advance(61_000);
    try {
      const res = await redeemCode(h, patientApp, landed.searchParams.get('code')!, verifier);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_grant');
    } finally {
      f.ctx.clock.advance(-61_000);
    }
  });

  test('the refresh token of a patient session rotates and keeps the patient scopes', async () => {
    const t = await tokensFor(ERIKA);
    const { createClientAssertion } = await import('../../src/client/crypto');
    const assertion = await createClientAssertion(patientApp.clientKey, { clientId: patientApp.clientId, audience: h.urls.token, now: h.now() });
    const proof = await createDpopProof(t.dpopKey, { method: 'POST', url: h.urls.token, iat: h.now() });
    const res = await request(f.app)
      .post('/svc/v1/token')
      .type('form')
      .set('DPoP', proof)
      .send(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: t.body.refresh_token, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }).toString());
    expect(res.status).toBe(200);
    expect(res.body.scope).toBe(t.body.scope);
    expect(decodePayload(res.body.access_token)).toMatchObject({ sub: ERIKA, kvnr: ERIKA });
  });
});
