import request from 'supertest';
import { generateEcKey } from '../../src/client/crypto';
import { evaluate } from '../../src/guard/policy/embedded';
import { scopeCovered } from '../../src/common/smart-scopes';
import type { PolicyData, PolicyInput } from '../../src/guard/policy/types';
import { exchange, guardHarness, TOKEN_EXCHANGE, type Harness } from './helpers/harness';

/** Never a 500 for bad input (docs/requirements.md#robustness-aims), even bytes PostgreSQL cannot store (NUL). */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness();
});
afterAll(() => h.close());

const NUL = '\u0000';

test.each([
  ['a NUL in the client assertion sub', { assertion: { claims: { iss: `a${NUL}b`, sub: `a${NUL}b` } } }, 401],
  ['a NUL in the assertion jti', { assertion: { claims: { jti: `j${NUL}` } } }, 200],
  ['a NUL in the DPoP jti', { dpop: { claims: { jti: `j${NUL}` } } }, 200],
  ['a NUL in the subject token jti', { subject: { claims: { jti: `s${NUL}` } } }, 200],
  ['a NUL in the posture product_id', { statement: (s: Record<string, unknown>) => ({ ...s, posture: { ...(s.posture as object), product_id: `p${NUL}` } }) }, 400],
  ['a NUL in the scope', { form: { scope: `system/Slot.rs${NUL}` } }, 400],
  ['a NUL in the resource', { form: { resource: `${NUL}` } }, 400],
])('%s is answered without a 500', async (_n, o, status) => {
  const { res } = await exchange(h, o as never);
  expect(res.status).toBe(status);
  expect(typeof res.body.error === 'string' || res.status === 200).toBe(true);
});

test.each([
  ['kid', async () => ({ ...(await generateEcKey()).publicJwk, kid: `k${NUL}` })],
])('a registration with a NUL in the %s is 400', async (_n, key) => {
  const res = await request(h.app)
    .post('/svc/v1/register')
    .send({ token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE], jwks: { keys: [await key()] } });
  expect(res.status).toBe(400);
});

test('a registration with a NUL in redirect_uris is 400', async () => {
  const key = await generateEcKey();
  const res = await request(h.app)
    .post('/svc/v1/register')
    .send({ token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE], jwks: { keys: [key.publicJwk] }, redirect_uris: [`https://a.example/${NUL}`] });
  expect(res.status).toBe(400);
});

test('a refresh token with a NUL is 400 invalid_grant', async () => {
  const res = await request(h.app).post('/svc/v1/token').type('form').send(`grant_type=refresh_token&refresh_token=%00`);
  expect(res.status).toBe(400);
});

describe('the embedded policy (unit)', () => {
  const data: PolicyData = {
    professions: ['1.2.276.0.76.4.50'],
    posture_types: ['software'],
    products: [{ product_id: 'terminus-client', versions: ['0.1.0'] }],
    audiences: ['http://localhost:8080/fhir'],
    scopes: { requestor: ['system/Slot.rs'], owner: ['system/*.cruds'] },
    token_ttl: { access_token: 60, refresh_token: 120 },
    blocked_users: ['1-BLOCKED'],
    blocked_ips: ['203.0.113.9'],
  };
  const input = (o: { product?: [string, string]; aud?: string; user?: string; ip?: string; scopes?: string[]; owner?: boolean }): PolicyInput => ({
    version: '1.1',
    client_registration_data: {
      client_id: 'c',
      product_id: o.product?.[0] ?? 'terminus-client',
      product_version: o.product?.[1] ?? '0.1.0',
      platform: 'linux',
      posture_type: 'software',
      registration_timestamp: 0,
      attestation_timestamp: 0,
      device_info: { os: 'Linux', os_version: '6' },
      attestation_result: {},
    },
    user_info: { identifier: o.user ?? '1-A', professionOID: '1.2.276.0.76.4.50', commonName: 'A', repository_owner: o.owner ?? false },
    authorization_request: {
      scopes: o.scopes ?? ['system/Slot.rs'],
      resource: 'http://localhost:8080/fhir',
      audience: [o.aud ?? 'http://localhost:8080/fhir'],
      grant_type: 'refresh_token',
      ip_address: o.ip ?? '127.0.0.1',
      http_method: 'POST',
    },
    delegation_context: null,
  });

  test.each<[string, Parameters<typeof input>[0], string]>([
    ['product_id unknown_product', { product: ['unknown_product', '0.1.0'] }, 'Client product or version is not allowed'],
    ['product_version 99.99.99', { product: ['terminus-client', '99.99.99'] }, 'Client product or version is not allowed'],
    ['aud https://evil.example.com/api', { aud: 'https://evil.example.com/api' }, 'One or more requested audiences are not allowed'],
    ['a blocked user', { user: '1-BLOCKED' }, 'User is on the blocklist'],
    ['a blocked IP', { ip: '203.0.113.9' }, 'Source IP address is blocked'],
  ])('denies %s', (_n, o, reason) => {
    expect(evaluate(data, input(o))).toEqual({ allow: false, reasons: [reason] });
  });

  test('allows with the configured lifetimes', () => {
    expect(evaluate(data, input({}))).toEqual({ allow: true, ttl: { access_token: 60, refresh_token: 120 }, reasons: [] });
    expect(evaluate(data, input({ owner: true, scopes: ['system/Schedule.cud'] })).allow).toBe(true);
  });

  test.each([
    ['system/Appointment.rs', ['system/Appointment.crus'], true],
    ['system/Appointment.d', ['system/Appointment.crus'], false],
    ['system/Schedule.cruds', ['system/*.cruds'], true],
    ['system/*.cruds', ['system/Slot.rs'], false],
    ['patient/Appointment.rs', ['system/*.cruds'], false],
    ['system/Appointment.', ['system/*.cruds'], false],
    ['patient/Appointment.cr', ['patient/Appointment.crus'], true],
    ['patient/Slot.rs', ['patient/*.rs'], true],
    ['system/Appointment.r', ['patient/Appointment.crus'], false],
  ] as const)('scope %s covered by %j: %s', (s, allowed, expected) => {
    expect(scopeCovered(s, [...allowed])).toBe(expected);
  });

  test('a patient has no profession and gets the patient scopes, nothing of an institution\'s', () => {
    const patient = (scopes: string[]) => {
      const i = input({ scopes });
      return { ...i, user_info: { identifier: 'X485231029', professionOID: '', commonName: 'X485231029', repository_owner: false, patient: true } };
    };
    expect(evaluate(data, patient(['patient/Appointment.crus', 'patient/Slot.rs'])).allow).toBe(true);
    expect(evaluate(data, patient(['system/Slot.rs']))).toEqual({ allow: false, reasons: ['One or more requested scopes are not allowed'] });
    expect(evaluate(data, { ...patient(['patient/Slot.rs']), user_info: { ...patient([]).user_info, patient: false } }).reasons).toContain('User profession is not allowed');
    expect(evaluate({ ...data, scopes: { ...data.scopes, patient: ['patient/Slot.rs'] } }, patient(['patient/Appointment.c'])).allow).toBe(false);
  });
});

test.each([
  ['/svc/v1/token', 'application/x-www-form-urlencoded; charset=klingon', 'grant_type=refresh_token', 415],
  ['/svc/v1/register', 'application/json; charset=klingon', '{}', 415],
  ['/svc/v1/token', 'application/x-www-form-urlencoded', '%E0%A4%A', 400],
  ['/svc/v1/register', 'application/json', '{"a":', 400],
])('POST %s with %s is a 4xx error object', async (path, type, body, status) => {
  const res = await request(h.app).post(path).set('content-type', type).send(body);
  expect(res.status).toBe(status);
  expect(typeof res.body.error).toBe('string');
});
