import request from 'supertest';
import { generateEcKey, type EcKey } from '../../src/client/crypto';
import { exchange, guardHarness, TOKEN_EXCHANGE, type Harness } from './helpers/harness';

/** POST /register, software type (docs/requirements.md#registration, ZETA UC01/UC02). */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness();
});
afterAll(() => h.close());

const body = (key: EcKey, extra: Record<string, unknown> = {}) => ({
  client_name: 'sdk-client',
  grant_types: [TOKEN_EXCHANGE, 'refresh_token'],
  token_endpoint_auth_method: 'private_key_jwt',
  jwks: { keys: [{ ...key.publicJwk, use: 'sig', kid: 'k1' }] },
  ...extra,
});

test('registers a software client: 201 with the registration record', async () => {
  const key = await generateEcKey();
  const res = await request(h.app).post('/svc/v1/register').send(body(key, { attestation_type: 'software', redirect_uris: ['https://app.example/oidc'] }));
  expect(res.status).toBe(201);
  expect(res.headers['content-type']).toMatch(/application\/json/);
  expect(res.body).toMatchObject({
    client_name: 'sdk-client',
    token_endpoint_auth_method: 'private_key_jwt',
    grant_types: [TOKEN_EXCHANGE, 'refresh_token'],
    jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: key.publicJwk.x, y: key.publicJwk.y, use: 'sig', kid: 'k1' }] },
    redirect_uris: ['https://app.example/oidc'],
  });
  expect(res.body.client_id).toMatch(/^[0-9a-f-]{36}$/);
  expect(Math.abs(res.body.client_id_issued_at - Date.now() / 1000)).toBeLessThan(5);
  const row = await h.ctx.db.query<{ status: string }>('SELECT status FROM guard_client WHERE client_id = $1', [res.body.client_id]);
  expect(row.rows[0].status).toBe('pending_attestation');
});

test('registers without attestation_type (the legacy software form)', async () => {
  const res = await request(h.app).post('/svc/v1/register').send(body(await generateEcKey()));
  expect(res.status).toBe(201);
});

test('answers 409 conflict when the client instance key is registered already', async () => {
  const key = await generateEcKey();
  expect((await request(h.app).post('/svc/v1/register').send(body(key))).status).toBe(201);
  const again = await request(h.app).post('/svc/v1/register').send(body(key, { client_name: 'other' }));
  expect(again.status).toBe(409);
  expect(again.body.error).toBe('conflict');
});

type Bad = [string, (key: EcKey) => unknown];
const bad: Bad[] = [
  ['jwks.keys[0].kty INVALID (ZETA UC02)', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, kty: 'INVALID' }] } })],
  ['jwks missing', (k) => body(k, { jwks: undefined })],
  ['jwks without keys', (k) => body(k, { jwks: {} })],
  ['jwks with two keys', (k) => body(k, { jwks: { keys: [k.publicJwk, k.publicJwk] } })],
  ['jwks with a private key member', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, d: 'AAAA' }] } })],
  ['a P-384 key', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, crv: 'P-384' }] } })],
  ['an RSA key', (k) => body(k, { jwks: { keys: [{ kty: 'RSA', n: 'AQAB', e: 'AQAB' }] } })],
  ['key use enc', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, use: 'enc' }] } })],
  ['key alg RS256', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, alg: 'RS256' }] } })],
  ['x not on the curve', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, x: 'A'.repeat(43) }] } })],
  ['x too short', (k) => body(k, { jwks: { keys: [{ ...k.publicJwk, x: 'AAAA' }] } })],
  ['token_endpoint_auth_method missing', (k) => body(k, { token_endpoint_auth_method: undefined })],
  ['token_endpoint_auth_method client_secret_basic', (k) => body(k, { token_endpoint_auth_method: 'client_secret_basic' })],
  ['grant_types missing', (k) => body(k, { grant_types: undefined })],
  ['grant_types empty', (k) => body(k, { grant_types: [] })],
  ['grant_types authorization_code (mobile flow not served)', (k) => body(k, { grant_types: ['authorization_code'] })],
  ['grant_types not strings', (k) => body(k, { grant_types: [1] })],
  ['client_name not a string', (k) => body(k, { client_name: 42 })],
  ['client_name with control characters', (k) => body(k, { client_name: 'a\nb' })],
  ['redirect_uris with http to a remote host', (k) => body(k, { redirect_uris: ['http://evil.example/cb'] })],
  ['redirect_uris not an array', (k) => body(k, { redirect_uris: 'https://a.example/cb' })],
  ['attestation_type unknown', (k) => body(k, { attestation_type: 'magic' })],
  ['attestation_type tpm (its own issue; not served yet)', (k) => body(k, { attestation_type: 'tpm', puk_ek_enc: { kty: 'RSA' }, c_ek_enc: 'AAAA' })],
  ['a software registration carrying hardware members', (k) => body(k, { attestation_type: 'software', c_ek_enc: 'AAAA' })],
  ['a JSON array', () => []],
  ['a JSON string', () => 'hello'],
];

test.each(bad)('rejects %s with 400 invalid_request and no client_id', async (_n, make) => {
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send(JSON.stringify(make(await generateEcKey())));
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_request');
  expect(typeof res.body.error_description).toBe('string');
  expect(res.body.error_uri).toBe(`${h.publicUrl}/svc/v1/errors#invalid_request`);
  expect(res.body.client_id).toBeUndefined();
});

test.each(['tpm', 'platform_a', 'platform_b', 'svc_attestation_token'])('attestation_type %s, known but without a verifier in this server, is refused clearly', async (type) => {
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send(JSON.stringify(body(await generateEcKey(), { attestation_type: type })));
  expect(res.status).toBe(400);
  expect(res.body).toMatchObject({ error: 'invalid_request', error_description: `attestation_type ${type} is not supported by this server` });
  expect(res.body.client_id).toBeUndefined();
});

test('an unknown attestation_type is answered with every type of the registry; discovery lists those this server registers', async () => {
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send(JSON.stringify(body(await generateEcKey(), { attestation_type: 'magic' })));
  expect(res.body).toMatchObject({ error: 'invalid_request', error_description: 'attestation_type must be one of software, tpm, platform_a, platform_b, svc_attestation_token' });
  const meta = await request(h.app).get('/.well-known/oauth-authorization-server');
  expect(meta.body.attestation_types_supported).toEqual(['software']);
});

test('a software registration is told every proof member it carries, of whichever method', async () => {
  const members = { c_ek_enc: 'AAAA', tpm_ek_certificate_chain: [], platform_a_attestation_object: 'AAAA' };
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send(JSON.stringify(body(await generateEcKey(), members)));
  expect(res.status).toBe(400);
  expect(res.body.error_description).toBe('a software registration must not carry c_ek_enc, tpm_ek_certificate_chain, platform_a_attestation_object');
});

test('rejects a body that is not JSON with 400 invalid_request (never 500)', async () => {
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send('{"client_name":');
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_request');
});

test('rejects a form body with 400 invalid_request', async () => {
  const res = await request(h.app).post('/svc/v1/register').type('form').send('client_name=x');
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_request');
});

test('rejects a body over 64 kB with 413', async () => {
  const res = await request(h.app).post('/svc/v1/register').set('content-type', 'application/json').send(JSON.stringify({ client_name: 'x'.repeat(70_000) }));
  expect(res.status).toBe(413);
  expect(res.body.error).toBe('invalid_request');
});

test('GET /register is 405', async () => {
  const res = await request(h.app).get('/svc/v1/register');
  expect(res.status).toBe(405);
  expect(res.headers.allow).toBe('POST');
});

test('an unused pending registration expires (1 h): its token exchange is then 401 invalid_client', async () => {
  const key = await generateEcKey();
  const reg = await request(h.app).post('/svc/v1/register').send(body(key));
  h.ctx.clock.advance(3601_000);
  try {
    const { res } = await exchange(h, { client: { clientId: reg.body.client_id, clientKey: key } });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
    // the next registration sweeps it away
    await request(h.app).post('/svc/v1/register').send(body(await generateEcKey()));
    const row = await h.ctx.db.query('SELECT 1 FROM guard_client WHERE client_id = $1', [reg.body.client_id]);
    expect(row.rows).toHaveLength(0);
  } finally {
    h.ctx.clock.advance(-3601_000);
  }
});

test('an active client does not expire', async () => {
  const first = await exchange(h);
  h.ctx.clock.advance(7200_000);
  try {
    const again = await exchange(h, { client: first.client });
    expect(again.res.status).toBe(200);
  } finally {
    h.ctx.clock.advance(-7200_000);
  }
});
