import crypto from 'node:crypto';
import { SignJWT, exportJWK } from 'jose';
import request from 'supertest';
import { generateEcKey, type EcKey } from '../../src/client/crypto';
import { exchange, guardHarness, nowSec, rawJws, type ExchangeOverrides, type Harness } from './helpers/harness';

/**
 * DPoP proofs at the token endpoint (docs/requirements.md#dpop-and-the-enforcement-point, RFC 9449
 * §4.3) and the ZETA UC06/UC10 DPoP manipulations: each bad proof is 400 with the exact code. Case
 * numbers (#1, #2, ...) are shared with the same cases at the resource (pep/dpop-resource.test.ts).
 */
let h: Harness;
let key: EcKey;
beforeAll(async () => {
  h = await guardHarness();
  key = await generateEcKey();
});
afterAll(() => h.close());

/** A proof built by hand: claims and header of a valid proof for this request, then `change` applied. */
async function handProof(change: (hdr: Record<string, unknown>, claims: Record<string, unknown>) => void, nonce: string, sign: EcKey | undefined = key): Promise<string> {
  const header: Record<string, unknown> = { typ: 'dpop+jwt', alg: 'ES256', jwk: key.publicJwk };
  const claims: Record<string, unknown> = { jti: crypto.randomUUID(), htm: 'POST', htu: h.urls.token, iat: nowSec(h), nonce };
  change(header, claims);
  return rawJws(header, claims, sign);
}

type Case = [string, (nonce: string) => Promise<ExchangeOverrides>];

const rejected400: Case[] = [
  ['#1 two DPoP headers', async (n) => ({ dpopKey: key, dpop: { values: [await handProof(() => {}, n), await handProof(() => {}, n)] } })],
  ['#2 not a JWT (two segments)', async () => ({ dpop: { values: ['abc.def'] } })],
  ['#2 not a JWT (garbage)', async () => ({ dpop: { values: ['!!!'] } })],
  ['#3 typ missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => delete hd.typ, n)] } })],
  ['#4 typ JWT (ZETA UC06)', async () => ({ dpop: { header: { typ: 'JWT' } } })],
  ['#4 typ secevent+jwt', async () => ({ dpop: { header: { typ: 'secevent+jwt' } } })],
  ['#4 typ dpop+jwt+wrongyousee', async () => ({ dpop: { header: { typ: 'dpop+jwt+wrongyousee' } } })],
  ['#4 typ JWD (ZETA UC10)', async () => ({ dpop: { header: { typ: 'JWD' } } })],
  ['#5 alg header removed', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => delete hd.alg, n)] } })],
  ['#6 alg none (unsigned)', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.alg = 'none'), n, undefined)] } })],
  ['#7 alg HS256', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.alg = 'HS256'), n)] } })],
  ['#7 alg unsupported (RS999, ZETA UC06)', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.alg = 'RS999'), n)] } })],
  ['#7 alg not a string', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.alg = 1), n)] } })],
  [
    '#8 alg RS256 with an RSA key',
    async (n) => {
      const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
      const proof = await new SignJWT({ jti: crypto.randomUUID(), htm: 'POST', htu: h.urls.token, iat: nowSec(h), nonce: n })
        .setProtectedHeader({ typ: 'dpop+jwt', alg: 'RS256', jwk: await exportJWK(publicKey) })
        .sign(privateKey);
      return { dpop: { values: [proof] } };
    },
  ],
  [
    '#9 bad signature',
    async (n) => {
      const p = await handProof(() => {}, n);
      const sig = Buffer.from(p.split('.')[2], 'base64url');
      sig[5] ^= 0xff;
      return { dpopKey: key, dpop: { values: [`${p.split('.').slice(0, 2).join('.')}.${sig.toString('base64url')}`] } };
    },
  ],
  ['#9 signed by another key than its jwk (ZETA UC12)', async (n) => ({ dpopKey: key, dpop: { values: [await handProof(() => {}, n, await generateEcKey())] } })],
  ['a critical header extension (crit, RFC 7515 §4.1.11)', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.crit = ['exp']), n)] } })],
  ['an unencoded payload (b64: false, RFC 7797)', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.b64 = false), n)] } })],
  ['#10 jwk missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => delete hd.jwk, n)] } })],
  ['#10 jwk a string', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.jwk = 'foo'), n)] } })],
  ['#10 jwk an array', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.jwk = []), n)] } })],
  ['#11 jwk contains the private key', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.jwk = { ...key.publicJwk, d: 'AAAA' }), n)] } })],
  ['#12 jwk is a symmetric oct key', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((hd) => (hd.jwk = { kty: 'oct', k: 'c2VjcmV0' }), n)] } })],
  ['#13 jti missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => delete c.jti, n)] } })],
  ['#14 htm missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => delete c.htm, n)] } })],
  ['#15 htm PUT for POST', async () => ({ dpop: { method: 'PUT' } })],
  ['#15 htm GET (ZETA UC06)', async () => ({ dpop: { method: 'GET' } })],
  ['#15 htm DELETE (ZETA UC10)', async () => ({ dpop: { method: 'DELETE' } })],
  ['#16 htu missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => delete c.htu, n)] } })],
  ['#16 htu not a string', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => (c.htu = 42), n)] } })],
  ['#16 htu unparsable', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => (c.htu = 'not a url'), n)] } })],
  ['#17 htu with a path appended', async () => ({ dpop: { claims: { htu: `${h.urls.token}/extra` } } })],
  ['#17 htu another host (ZETA UC06)', async () => ({ dpop: { claims: { htu: 'https://wrong.url/token' } } })],
  ['#22 iat missing', async (n) => ({ dpopKey: key, dpop: { values: [await handProof((_h, c) => delete c.iat, n)] } })],
  ['#23 iat one hour ahead', async () => ({ dpop: { iat: nowSec(h) + 3600 } })],
  ['#23 iat one hour ago', async () => ({ dpop: { iat: nowSec(h) - 3600 } })],
  ['#23 iat 2023-12-01 (ZETA UC06)', async () => ({ dpop: { iat: 1701432000 } })],
  ['#23 iat 2050-01-01 (ZETA UC06)', async () => ({ dpop: { iat: 2524608000 } })],
  ['#38 nonce not a string', async () => ({ dpop: { claims: { nonce: 1234567 } } })],
];

test.each(rejected400)('token endpoint rejects a DPoP proof: %s -> 400 invalid_dpop_proof', async (_name, build) => {
  const nonce = await freshNonce();
  const { res } = await exchange(h, { nonce, ...(await build(nonce)) });
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_dpop_proof');
  expect(typeof res.body.error_description).toBe('string');
  expect(res.body.access_token).toBeUndefined();
});

test('a missing DPoP header is 400 invalid_dpop_proof', async () => {
  const { res } = await exchange(h, { dpop: { values: [] } });
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('invalid_dpop_proof');
});

const accepted: [string, (nonce: string) => Promise<ExchangeOverrides>][] = [
  ['#18 htu with ?query#fragment', async () => ({ dpop: { claims: { htu: `${h.urls.token}?a=1#frag` } } })],
  ['#19 request with a query, htu without', async () => ({ path: '/svc/v1/token?x=1' })],
  ['#20 htu scheme and host upper-case', async () => ({ dpop: { claims: { htu: h.urls.token.replace('http://localhost', 'HTTP://LOCALHOST') } } })],
  ['#24 iat 10 s ahead', async () => ({ dpop: { iat: nowSec(h) + 10 } })],
  ['#24 iat 10 s ago', async () => ({ dpop: { iat: nowSec(h) - 10 } })],
  ['#25 nbf and exp in the proof', async () => ({ dpop: { claims: { nbf: nowSec(h) - 5, exp: nowSec(h) + 60 } } })],
  ['#26 extra header and claim members', async () => ({ dpop: { header: { foo: 'bar' }, claims: { extra: { deep: true } } } })],
  ['#41 header name DPOP in capitals', async () => ({ dpop: { headerName: 'DPOP' } })],
];

test.each(accepted)('token endpoint accepts a DPoP proof: %s -> 200', async (_name, build) => {
  const nonce = await freshNonce();
  const { res } = await exchange(h, { nonce, ...(await build(nonce)) });
  expect(res.status).toBe(200);
  expect(res.body.token_type).toBe('DPoP');
});

test('#21 htu with the explicit default port is accepted', async () => {
  const other = await guardHarness({ env: { PUBLIC_URL: 'https://terminus.example' } });
  try {
    const { res } = await exchange(other, { dpop: { claims: { htu: 'https://terminus.example:443/svc/v1/token' } } });
    expect(res.status).toBe(200);
  } finally {
    await other.close();
  }
});

test('#27 a replayed proof (same jti) is 400 invalid_dpop_proof', async () => {
  const nonce = await freshNonce();
  const proof = await handProof(() => {}, nonce);
  const first = await exchange(h, { nonce, dpopKey: key, dpop: { values: [proof] } });
  expect(first.res.status).toBe(200);
  const second = await exchange(h, { nonce: await freshNonce(), dpopKey: key, dpop: { values: [proof] } });
  expect(second.res.status).toBe(400);
  expect(second.res.body.error).toBe('invalid_dpop_proof');
});

test('#36 a proof without nonce is 400 use_dpop_nonce with a fresh DPoP-Nonce', async () => {
  const { res } = await exchange(h, { dpop: { nonce: null } });
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('use_dpop_nonce');
  expect(res.headers['dpop-nonce']).toMatch(/^[A-Za-z0-9_-]{22}$/);
});

test.each([
  ['forged (ZETA UC06 nonce=1234567)', '1234567'],
  ['forged (ZETA UC10 invalidNonceValue123)', 'invalidNonceValue123'],
])('#37 a proof with a %s nonce is 400 use_dpop_nonce', async (_n, bad) => {
  const { res } = await exchange(h, { dpop: { nonce: bad } });
  expect(res.status).toBe(400);
  expect(res.body.error).toBe('use_dpop_nonce');
  expect(res.headers['dpop-nonce']).toBeDefined();
});

test('#37 an expired nonce is 400 use_dpop_nonce', async () => {
  const nonce = await freshNonce();
  h.ctx.clock.advance(301_000);
  try {
    const { res } = await exchange(h, { nonce });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('use_dpop_nonce');
  } finally {
    h.ctx.clock.advance(-301_000);
  }
});

test('#37 a used nonce is 400 use_dpop_nonce', async () => {
  const nonce = await freshNonce();
  expect((await exchange(h, { nonce })).res.status).toBe(200);
  const again = await exchange(h, { nonce });
  expect(again.res.status).toBe(400);
  expect(again.res.body.error).toBe('use_dpop_nonce');
});

async function freshNonce(): Promise<string> {
  return (await request(h.app).get('/svc/v1/nonce')).body.nonce;
}
