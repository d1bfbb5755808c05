import crypto from 'node:crypto';
import { SignJWT } from 'jose';
import { generateEcKey } from '../../src/client/crypto';
import { exchange, guardHarness, nowSec, rawJws, registerClient, type ExchangeOverrides, type Harness, type RegisteredClient } from './helpers/harness';

/**
 * Client authentication by private_key_jwt (RFC 7523) at the token endpoint; plus the ZETA UC06
 * assertion manipulations, where Terminus answers 401 `invalid_client`, the code for failed client
 * authentication (docs/requirements.md#guard-error-object).
 */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness();
});
afterAll(() => h.close());

const claimsOf = (c: RegisteredClient, extra: Record<string, unknown> = {}) => ({
  iss: c.clientId,
  sub: c.clientId,
  aud: h.urls.token,
  iat: nowSec(h),
  exp: nowSec(h) + 60,
  jti: crypto.randomUUID(),
  ...extra,
});

type Case = [string, number, string, (c: RegisteredClient) => Promise<ExchangeOverrides>];

const cases: Case[] = [
  ['#1 no client authentication at all', 401, 'invalid_client', async () => ({ form: { client_assertion: undefined, client_assertion_type: undefined } })],
  ['#2 client_assertion_type missing', 400, 'invalid_request', async () => ({ form: { client_assertion_type: undefined } })],
  ['#3 wrong client_assertion_type', 400, 'invalid_request', async () => ({ form: { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer' } })],
  ['#4 malformed assertion', 400, 'invalid_request', async () => ({ assertion: { raw: 'not.a.jwt' } })],
  ['#4 assertion of two segments', 400, 'invalid_request', async () => ({ assertion: { raw: 'eyJhbGciOiJFUzI1NiJ9.e30' } })],
  ['#5 sub missing', 401, 'invalid_client', async () => ({ assertion: { claims: { sub: undefined } } })],
  ['#6 iss missing', 401, 'invalid_client', async () => ({ assertion: { claims: { iss: undefined } } })],
  ['#6 iss another client (ZETA UC06 iss=evil_client)', 401, 'invalid_client', async () => ({ assertion: { claims: { iss: 'evil_client' } } })],
  ['#7 body client_id differs from sub', 400, 'invalid_request', async () => ({ form: { client_id: 'someone-else' } })],
  ['#8 aud missing', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: undefined } } })],
  ['#9 aud another server (ZETA UC06)', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: 'https://wrong.url/token' } } })],
  ['#10 aud an array holding the issuer', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: [h.publicUrl] } } })],
  ['#10 aud an array holding the token endpoint', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: [h.urls.token] } } })],
  ['#10 aud an array with a non-string member', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: [1] } } })],
  ['#11 aud a PAR endpoint URL', 401, 'invalid_client', async () => ({ assertion: { claims: { aud: `${h.publicUrl}/svc/v1/par` } } })],
  ['#12 exp missing', 401, 'invalid_client', async () => ({ assertion: { claims: { exp: undefined } } })],
  ['#13 expired 5 min ago (ZETA UC06 exp in the past)', 401, 'invalid_client', async () => ({ assertion: { claims: { exp: nowSec(h) - 300 } } })],
  ['#15 iat 120 s in the future', 401, 'invalid_client', async () => ({ assertion: { claims: { iat: nowSec(h) + 120, exp: nowSec(h) + 180 } } })],
  ['#15 nbf 120 s in the future', 401, 'invalid_client', async () => ({ assertion: { claims: { nbf: nowSec(h) + 120 } } })],
  ['#15 exp one hour ahead (longer than 5 min)', 401, 'invalid_client', async () => ({ assertion: { claims: { exp: nowSec(h) + 3600 } } })],
  ['#16 jti missing', 401, 'invalid_client', async () => ({ assertion: { claims: { jti: undefined } } })],
  [
    '#18 alg ES384 (not the registered ES256)',
    401,
    'invalid_client',
    async (c) => {
      const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' });
      return { assertion: { raw: await new SignJWT(claimsOf(c)).setProtectedHeader({ alg: 'ES384' }).sign(privateKey) } };
    },
  ],
  [
    '#19 alg RS256',
    401,
    'invalid_client',
    async (c) => {
      const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
      return { assertion: { raw: await new SignJWT(claimsOf(c)).setProtectedHeader({ alg: 'RS256' }).sign(privateKey) } };
    },
  ],
  ['#19 alg HS256', 401, 'invalid_client', async (c) => ({ assertion: { raw: await new SignJWT(claimsOf(c)).setProtectedHeader({ alg: 'HS256' }).sign(crypto.randomBytes(32)) } })],
  ['#19 alg none', 401, 'invalid_client', async (c) => ({ assertion: { raw: rawJws({ alg: 'none' }, claimsOf(c)) } })],
  ['#19 alg RS999 (ZETA UC06)', 401, 'invalid_client', async (c) => ({ assertion: { raw: rawJws({ alg: 'RS999', typ: 'JWT' }, claimsOf(c), c.clientKey) } })],
  ['a critical header extension (crit)', 401, 'invalid_client', async (c) => ({ assertion: { raw: rawJws({ alg: 'ES256', typ: 'JWT', crit: ['exp'] }, claimsOf(c), c.clientKey) } })],
  ['#20 signed by a key not registered for the client', 401, 'invalid_client', async () => ({ assertion: { signWith: await generateEcKey() } })],
  ['typ dpop+jwt (ZETA UC06)', 401, 'invalid_client', async () => ({ assertion: { header: { typ: 'dpop+jwt' } } })],
  ['an unknown client', 401, 'invalid_client', async () => ({ assertion: { claims: { iss: 'no-such-client', sub: 'no-such-client' } } })],
  ['#21 Authorization: Basic as well', 400, 'invalid_request', async () => ({ headers: { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } })],
  ['#21 client_secret as well', 400, 'invalid_request', async () => ({ form: { client_secret: 'secret' } })],
  ['#21 two Authorization headers (Node would keep only the first)', 400, 'invalid_request', async () => ({ headers: { Authorization: ['DPoP x', `Basic ${Buffer.from('a:b').toString('base64')}`] as unknown as string } })],
];

test.each(cases)('client authentication: %s -> %i %s', async (_name, status, error, build) => {
  const client = await registerClient(h);
  const { res } = await exchange(h, { client, ...(await build(client)) });
  expect(res.status).toBe(status);
  expect(res.body.error).toBe(error);
  expect(res.body.access_token).toBeUndefined();
});

test('#22 a repeated form parameter is 400 invalid_request', async () => {
  const client = await registerClient(h);
  const { res } = await exchange(h, { client, extraBody: 'grant_type=refresh_token' });
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_request');
  expect(res.body.error_description).toMatch(/more than once/);
});

test('#23 error_description never echoes input (no CR, LF or TAB from the request)', async () => {
  const { res } = await exchange(h, { form: { client_id: 'evil\r\nX-Injected: 1\t' } });
  expect(res.status).toBe(400);
  expect(res.body.error_description).not.toMatch(/[\r\n\t]|evil|Injected/);
});

test.each([
  ['#14 iat 8 s in the future', () => ({ iat: nowSec(h) + 8 })],
  ['#14 nbf 8 s in the future', () => ({ nbf: nowSec(h) + 8 })],
  ['aud the issuer identifier as a string (rfc7523bis)', () => ({ aud: h.publicUrl })],
  ['aud the token endpoint as a string', () => ({ aud: h.urls.token })],
])('client authentication accepts %s', async (_name, claims) => {
  const { res } = await exchange(h, { assertion: { claims: claims() } });
  expect(res.status).toBe(200);
});

test('#17 a replayed assertion (same jti) is 401 invalid_client', async () => {
  const client = await registerClient(h);
  const jti = crypto.randomUUID();
  const first = await exchange(h, { client, assertion: { claims: { jti } } });
  expect(first.res.status).toBe(200);
  const second = await exchange(h, { client, assertion: { claims: { jti } } });
  expect(second.res.status).toBe(401);
  expect(second.res.body.error).toBe('invalid_client');
  expect(second.res.body.error_description).toMatch(/only be used once/);
});
