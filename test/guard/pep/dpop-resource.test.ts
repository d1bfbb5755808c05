import crypto from 'node:crypto';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import type { TestToken } from '../helpers/get-token';
import { accessTokenHash } from '../../../src/guard/dpop/verify-dpop-proof';
import { call, challenge, decodePayload, guardSigningKey, institution, nowSec, pepHarness, proofFor, rawJws, type CallOptions, type PepHarness } from './helpers';

/**
 * DPoP at the resource (docs/requirements.md#dpop-and-the-enforcement-point): every case with its
 * exact status, `error` and `WWW-Authenticate` (RFC 9449 §7.1). The target is an ordinary search.
 * Case numbers are shared with the same cases at the token endpoint in ../dpop-proof.test.ts.
 */
describe('DPoP at the resource', () => {
  let h: PepHarness;
  let t: TestToken;
  beforeAll(async () => {
    h = await pepHarness();
    t = await institution(h, { telematikId: '1-PEP-DPOP' });
  });
  afterAll(() => h.close());

  const PATH = '/Schedule';
  const header = (extra: Record<string, unknown> = {}) => ({ typ: 'dpop+jwt', alg: 'ES256', jwk: t.dpopKey.publicJwk, ...extra });
  const claims = (extra: Record<string, unknown> = {}) => ({
    jti: crypto.randomUUID(),
    htm: 'GET',
    htu: `${h.base}${PATH}`,
    iat: nowSec(h),
    ath: accessTokenHash(t.accessToken),
    ...extra,
  });
  const without = (o: Record<string, unknown>, name: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== name));
  const signed = (hd: Record<string, unknown>, cl: Record<string, unknown>) => rawJws(hd, cl, t.dpopKey);

  type Build = () => Promise<CallOptions & { path?: string }>;
  const proof = (p: () => string | Promise<string>): Build => async () => ({ proof: await p() });

  const refused: [string, Build, number, string, string | undefined][] = [
    ['1 two DPoP headers', async () => ({ proof: [await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken), await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken)] }), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['2 not a JWT (two segments)', proof(() => 'eyJhbGciOiJFUzI1NiJ9.e30'), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['2 not a JWT (garbage)', proof(() => 'garbage'), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['3 typ missing', proof(() => signed(without(header(), 'typ'), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['4 typ JWT', proof(() => signed(header({ typ: 'JWT' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['4 typ secevent+jwt', proof(() => signed(header({ typ: 'secevent+jwt' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['4 typ dpop+jwt+wrongyousee', proof(() => signed(header({ typ: 'dpop+jwt+wrongyousee' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['5 alg removed', proof(() => signed(without(header(), 'alg'), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['6 alg none, unsigned', proof(() => rawJws(header({ alg: 'none' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['7 alg HS256', proof(() => signed(header({ alg: 'HS256' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['7 alg unsupported', proof(() => signed(header({ alg: 'unsupported' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['7 alg not a string', proof(() => signed(header({ alg: 1 }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    [
      '8 alg RS256 with an RSA key',
      proof(async () => {
        const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
        return signCompactJws2({ typ: 'dpop+jwt', alg: 'RS256', jwk: await exportJWK(publicKey) }, claims(), privateKey);
      }),
      401,
      'invalid_dpop_proof',
      challenge('invalid_dpop_proof'),
    ],
    [
      '9 bad signature',
      proof(async () => {
        const p = await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken);
        const [a, b, s] = p.split('.');
        const sig = Buffer.from(s, 'base64url');
        sig[5] ^= 0xff;
        return `${a}.${b}.${sig.toString('base64url')}`;
      }),
      401,
      'invalid_dpop_proof',
      challenge('invalid_dpop_proof'),
    ],
    ['10 jwk missing', proof(() => signed(without(header(), 'jwk'), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['10 jwk a string', proof(() => signed(header({ jwk: 'foo' }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['10 jwk an array', proof(() => signed(header({ jwk: [] }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['11 jwk with the private key', proof(async () => signed(header({ jwk: await exportJWK(t.dpopKey.privateKey) }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['12 jwk symmetric (oct)', proof(() => signed(header({ jwk: { kty: 'oct', k: 'c2VjcmV0' } }), claims())), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['13 jti missing', proof(() => signed(header(), without(claims(), 'jti'))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['14 htm missing', proof(() => signed(header(), without(claims(), 'htm'))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['15 htm PUT for a GET', proof(() => signed(header(), claims({ htm: 'PUT' }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['16 htu missing', proof(() => signed(header(), without(claims(), 'htu'))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['16 htu not a string', proof(() => signed(header(), claims({ htu: 1 }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['16 htu unparsable', proof(() => signed(header(), claims({ htu: 'not a url' }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['17 htu with a path appended', proof(() => signed(header(), claims({ htu: `${h.base}${PATH}/extra` }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['17 htu of another origin', proof(() => signed(header(), claims({ htu: 'https://wrong.url/resource' }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['22 iat missing', proof(() => signed(header(), without(claims(), 'iat'))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['23 iat one hour ahead', proof(() => signed(header(), claims({ iat: nowSec(h) + 3600 }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['23 iat one hour ago', proof(() => signed(header(), claims({ iat: nowSec(h) - 3600 }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['23 iat 1600000000', proof(() => signed(header(), claims({ iat: 1600000000 }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['28 ath missing', proof(() => signed(header(), without(claims(), 'ath'))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['29 ath wrong', proof(() => signed(header(), claims({ ath: accessTokenHash('another token') }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    [
      '30 proof signed by another key than cnf.jkt',
      proof(async () => {
        const other = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
        const jwk = await exportJWK(crypto.createPublicKey(other));
        return signCompactJws2(header({ jwk: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y } }), claims(), other);
      }),
      401,
      'invalid_token',
      challenge('invalid_token'),
    ],
    ['31 DPoP-bound token without a DPoP header', async () => ({ proof: null }), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['32 DPoP-bound token sent as Bearer, no proof', async () => ({ scheme: 'Bearer', proof: null }), 401, 'invalid_token', challenge('invalid_token')],
    ['33 Bearer scheme while a DPoP header is present', async () => ({ scheme: 'Bearer' }), 401, 'invalid_token', challenge('invalid_token')],
    ['34 token in the query instead of the header', async () => ({ scheme: null, path: `${PATH}?access_token=${t.accessToken}` }), 400, 'invalid_request', undefined],
    ['34 token in the query as well as the header', async () => ({ path: `${PATH}?access_token=${t.accessToken}` }), 400, 'invalid_request', undefined],
    [
      '35 unbound token (no cnf) with the DPoP scheme and a proof',
      async () => {
        const g = await guardSigningKey(h);
        const token = g.sign({ alg: 'ES256', typ: 'at+jwt', kid: g.kid }, without(decodePayload(t.accessToken), 'cnf'));
        return { token, proof: await proofFor(h, t.dpopKey, 'GET', PATH, token) };
      },
      401,
      'invalid_token',
      challenge('invalid_token'),
    ],
    ['38 nonce not a string', proof(() => signed(header(), claims({ nonce: 42 }))), 401, 'invalid_dpop_proof', challenge('invalid_dpop_proof')],
    ['no credentials at all (RFC 6750 §3.1: challenge without error)', async () => ({ scheme: null, proof: null }), 401, 'invalid_token', 'DPoP algs="ES256"'],
    ['unsupported scheme (Basic)', async () => ({ scheme: 'Basic', proof: null }), 401, 'invalid_token', 'DPoP algs="ES256"'],
    ['DPoP scheme without a token', async () => ({ token: '', proof: null }), 401, 'invalid_token', challenge('invalid_token')],
    // Node keeps only the first of two Authorization headers: refused, not silently ignored.
    ['two Authorization headers', async () => ({ scheme: null, headers: { Authorization: [`DPoP ${t.accessToken}`, 'Basic dXNlcjpwdw=='] } }), 400, 'invalid_request', undefined],
    ['two Authorization headers, both the same token', async () => ({ scheme: null, headers: { Authorization: [`DPoP ${t.accessToken}`, `DPoP ${t.accessToken}`] } }), 400, 'invalid_request', undefined],
  ];

  test.each(refused)('row %s is refused', async (_name, build, status, error, wwwAuthenticate) => {
    const o = await build();
    const res = await call(h, t, 'GET', o.path ?? PATH, o);
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(error);
    expect(typeof res.body.error_description).toBe('string');
    expect(res.body.error_uri).toBe(`${h.ctx.config.publicUrl}/svc/v1/errors#${error}`);
    expect(res.headers['www-authenticate']).toBe(wwwAuthenticate);
    expect(res.headers['svc-api-version']).toMatch(/^\d+\.\d+\.\d+/);
  });

  const accepted: [string, Build][] = [
    ['18 htu with ?query#fragment', proof(() => signed(header(), claims({ htu: `${h.base}${PATH}?a=b#frag` })))],
    ['19 the request has a query the htu omits', async () => ({ path: `${PATH}?_count=1`, proof: await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken) })],
    ['20 htu scheme and host upper-case', proof(() => signed(header(), claims({ htu: `HTTPS://TERMINUS.EXAMPLE/fhir${PATH}` })))],
    ['21 htu with the default port :443', proof(() => signed(header(), claims({ htu: `https://terminus.example:443/fhir${PATH}` })))],
    ['24 iat 10 s ahead', proof(() => signed(header(), claims({ iat: nowSec(h) + 10 })))],
    ['24 iat 10 s ago', proof(() => signed(header(), claims({ iat: nowSec(h) - 10 })))],
    ['25 nbf and exp in the proof', proof(() => signed(header(), claims({ nbf: nowSec(h) - 5, exp: nowSec(h) + 60 })))],
    ['26 extra header and claim members', proof(() => signed(header({ kid: 'whatever', x5u: undefined, extra: 1 }), claims({ extra: 'x' })))],
    ['36/37 a nonce claim (the resource issues none; ZETA UC12)', proof(() => signed(header(), claims({ nonce: 'anything' })))],
    ['41 header name DPOP in capitals', async () => ({ proof: null, headers: { DPOP: await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken) } })],
    ['42 scheme in lower case (dpop)', async () => ({ scheme: 'dpop' })],
    ['42 scheme in mixed case (DpOp)', async () => ({ scheme: 'DpOp' })],
  ];

  test.each(accepted)('row %s is accepted', async (_name, build) => {
    const o = await build();
    const res = await call(h, t, 'GET', o.path ?? PATH, o);
    expect(res.status).toBe(200);
    expect(res.body.resourceType).toBe('Bundle');
  });

  test('27 a replayed proof (same jti) is refused the second time (RFC 9449 §11.1)', async () => {
    const p = await proofFor(h, t.dpopKey, 'GET', PATH, t.accessToken);
    const first = await call(h, t, 'GET', PATH, { proof: p });
    expect(first.status).toBe(200);
    const second = await call(h, t, 'GET', PATH, { proof: p });
    expect(second.status).toBe(401);
    expect(second.body.error).toBe('invalid_dpop_proof');
    expect(second.headers['www-authenticate']).toBe(challenge('invalid_dpop_proof'));
  });

  test('a jti with any characters (a NUL, non-ASCII, the longest allowed) is accepted once, on every store', async () => {
    for (const jti of [`nul\u0000${crypto.randomUUID()}`, `ümlaut-✓-${crypto.randomUUID()}`, `${'x'.repeat(220)}${crypto.randomUUID()}`]) {
      const p = await signed(header(), claims({ jti }));
      const first = await call(h, t, 'GET', PATH, { proof: p });
      expect(first.status).toBe(200);
      const second = await call(h, t, 'GET', PATH, { proof: p });
      expect(second.status).toBe(401);
      expect(second.body.error_description).toBe('DPoP proof jti has been used before');
    }
  });

  test('a HEAD request with a valid proof passes the guard and is answered as a GET without body', async () => {
    const res = await call(h, t, 'HEAD', '/Schedule/Schedule-1');
    expect(res.status).toBe(404);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  test('the proof key thumbprint is what the access token binds (cnf.jkt)', async () => {
    expect(decodePayload(t.accessToken).cnf).toEqual({ jkt: await calculateJwkThumbprint(t.dpopKey.publicJwk) });
  });
});

/** An ECDSA or RSA signature over header.payload (keys jose would not pair with these headers). */
function signCompactJws2(header: Record<string, unknown>, claims: Record<string, unknown>, key: crypto.KeyObject): string {
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  const sig = crypto.sign('sha256', Buffer.from(input), key.asymmetricKeyType === 'ec' ? { key, dsaEncoding: 'ieee-p1363' } : key);
  return `${input}.${sig.toString('base64url')}`;
}
