import crypto from 'node:crypto';
import type { TestToken } from '../helpers/get-token';
import { call, challenge, decodePayload, guardSigningKey, institution, nowSec, pepHarness, proofFor, type PepHarness } from './helpers';

/**
 * Access tokens at the resource (docs/requirements.md#dpop-and-the-enforcement-point, ZETA UC12):
 * the access token re-signed with the guard's own key, one thing changed each time; only the
 * unchanged control passes. Plus the time checks with the 60 s leeway and the verified-token cache.
 */
describe('access tokens at the resource', () => {
  let h: PepHarness;
  let t: TestToken;
  let resign: (header: Record<string, unknown>, claims: Record<string, unknown>) => string;
  let kid: string;
  beforeAll(async () => {
    h = await pepHarness();
    t = await institution(h, { telematikId: '1-PEP-AT' });
    const g = await guardSigningKey(h);
    resign = g.sign;
    kid = g.kid;
  });
  afterAll(() => h.close());

  const get = async (token: string) => call(h, t, 'GET', '/Slot', { token, proof: await proofFor(h, t.dpopKey, 'GET', '/Slot', token) });
  const header = (extra: Record<string, unknown> = {}) => ({ alg: 'ES256', typ: 'at+jwt', kid, ...extra });
  const claims = (extra: Record<string, unknown> = {}) => ({ ...decodePayload(t.accessToken), ...extra });
  const foreignKey = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

  test('control: re-signed unchanged with the guard key → 200', async () => {
    const res = await get(resign(header(), claims()));
    expect(res.status).toBe(200);
  });

  const refused: [string, () => string][] = [
    ['signed with another key under the guard kid', () => signEs256(header(), claims(), foreignKey)],
    ['alg RS1', () => resign(header({ alg: 'RS1' }), claims())],
    ['alg none', () => `${b64(header({ alg: 'none' }))}.${b64(claims())}.`],
    ['typ dpop', () => resign(header({ typ: 'dpop' }), claims())],
    ['typ dpop+jwt (a proof is not a token)', () => resign(header({ typ: 'dpop+jwt' }), claims())],
    ['unknown kid', () => resign(header({ kid: 'not-a-key-of-ours' }), claims())],
    ['exp in the past (beyond the 60 s leeway)', () => resign(header(), claims({ exp: nowSec(h) - 61 }))],
    ['nbf in the future (beyond the leeway)', () => resign(header(), claims({ nbf: nowSec(h) + 120 }))],
    ['iat in the future (beyond the leeway)', () => resign(header(), claims({ iat: nowSec(h) + 120 }))],
    ['aud=unknown', () => resign(header(), claims({ aud: ['https://unknown.example/fhir'] }))],
    ['iss=someone', () => resign(header(), claims({ iss: 'https://someone.example' }))],
    ['nonce added', () => resign(header(), claims({ nonce: 'n-0S6_WzA2Mj' }))],
    ['no sub', () => resign(header(), { ...claims(), sub: undefined })],
    ['no client_id', () => resign(header(), { ...claims(), client_id: undefined })],
    ['payload tampered without re-signing', () => tamper(t.accessToken, { scope: 'system/*.cruds' })],
  ];

  test.each(refused)('%s → 401 invalid_token', async (_name, build) => {
    const res = await get(build());
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_token');
    expect(res.headers['www-authenticate']).toBe(challenge('invalid_token'));
  });

  test('exp within the 60 s leeway is still accepted', async () => {
    const res = await get(resign(header(), claims({ exp: nowSec(h) - 30 })));
    expect(res.status).toBe(200);
  });

  test('a cached token still expires: after its lifetime plus leeway the same token is refused', async () => {
    const { exp } = decodePayload(t.accessToken) as { exp: number };
    expect((await call(h, t, 'GET', '/Slot')).status).toBe(200);
    h.ctx.clock.advance((exp - nowSec(h) + 61) * 1000);
    try {
      const res = await call(h, t, 'GET', '/Slot');
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_token');
      expect(res.body.error_description).toBe('the access token has expired');
    } finally {
      h.ctx.clock.advance(-(exp - nowSec(h) + 61) * 1000);
    }
  });
});

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

function signEs256(header: Record<string, unknown>, claims: Record<string, unknown>, key: crypto.KeyObject): string {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

function tamper(jwt: string, change: Record<string, unknown>): string {
  const [hd, p, s] = jwt.split('.');
  const claims = { ...JSON.parse(Buffer.from(p, 'base64url').toString('utf8')), ...change };
  return `${hd}.${b64(claims)}.${s}`;
}
