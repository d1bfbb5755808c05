/**
 * The additional security layer (docs/requirements.md#additional-security-layer-asl) end to end
 * against the real app: the handshake of the reference client, an encrypted FHIR search with DPoP
 * inside, every error row of the table, replayed counters, a session continued on a second app
 * instance sharing the store, and ASL_MODE required.
 */
import request from 'supertest';
import { AslChannel, AslClientError, serializeRequest } from '../../src/client/asl-channel';
import { createDpopProof } from '../../src/client/crypto';
import { composeTerminus } from '../../src/app';
import { decryptFrame, deriveK1, deriveK2, encapsulate, encryptFrame, generateHybridKeyPair, open, seal, sha256, decapsulate } from '../../src/common/asl/asl-crypto';
import { bytesOf, decodeMap, encodeCbor, pointOf } from '../../src/common/asl/asl-messages';
import { createTestContext } from '../helpers/context';
import { supertestTransport } from './helpers/transport';
import { institution, pepHarness, type PepHarness } from './pep/helpers';
import type { TestToken } from './helpers/get-token';

const PUBLIC_URL = 'https://terminus.example';

let h: PepHarness;
let t: TestToken;

beforeAll(async () => {
  h = await pepHarness({ env: { ASL_MODE: 'supported' }, fixture: true });
  t = await institution(h, { telematikId: '1-ASL-PRAXIS' });
});
afterAll(() => h?.close());

const channel = (app = h.app) => new AslChannel({ origin: PUBLIC_URL, transport: supertestTransport(app), env: 0, now: () => Math.floor(h.ctx.now().getTime() / 1000) });

/** A signed FHIR request as the reference client sends it inside the tunnel. */
async function signed(method: string, path: string, token = t): Promise<{ method: string; url: string; headers: Record<string, string> }> {
  const url = `${PUBLIC_URL}${path}`;
  return { method, url, headers: { authorization: `DPoP ${token.accessToken}`, dpop: await token.makeProof(method, url.split('?')[0], token.accessToken), accept: 'application/fhir+json' } };
}

const cbor = (res: request.Response) => decodeMap(res.body as Buffer, 'answer');
const raw = (r: request.Test) =>
  r.buffer(true).parse((res, done) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => done(null, Buffer.concat(chunks)));
  });

/** A handshake by hand, to break it at any step: returns what a test needs to go on. */
async function handshakeByHand(app = h.app) {
  const own = generateHybridKeyPair();
  const m1 = encodeCbor({ MessageType: 'M1', ECDH_PK: own.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
  const res = await raw(request(app).post('/ASL').set('Content-Type', 'application/cbor').set('Accept', 'application/cbor').send(m1));
  expect(res.status).toBe(200);
  const cid = res.headers['svc-asl-cid'];
  const m2 = res.body as Buffer;
  const msg2 = decodeMap(m2, 'M2');
  const ssE = decapsulate(own.privateKeys, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
  const k1 = deriveK1(ssE);
  const keys = decodeMap(bytesOf(decodeMap(open(k1.s2c, bytesOf(msg2, 'AEAD_ct'))!, 'signed'), 'signed_pub_keys'), 'keys');
  const enc = encapsulate({ ecdh: pointOf(keys, 'ECDH_PK'), mlkem: bytesOf(keys, 'ML-KEM-768_PK') });
  const k2 = deriveK2(ssE, enc.sharedSecret);
  const m3For = (o: { flipConfirmation?: boolean; inner?: Record<string, unknown> } = {}) => {
    const aeadCt = seal(k1.c2s, encodeCbor(o.inner ?? { ECDH_ct: enc.ecdhCt, 'ML-KEM-768_ct': Buffer.from(enc.mlkemCt), ERP: false, ESO: false }));
    const kc = seal(k2.c2sKeyConfirmation, sha256(m1, m2, aeadCt));
    if (o.flipConfirmation) kc[kc.length - 1] ^= 1;
    return encodeCbor({ MessageType: 'M3', AEAD_ct: aeadCt, AEAD_ct_key_confirmation: kc });
  };
  return { cid, m1, m2, k1, k2, m3For, enc };
}

async function established(app = h.app) {
  const hs = await handshakeByHand(app);
  const m3 = hs.m3For();
  const res = await raw(request(app).post(hs.cid).set('Content-Type', 'application/cbor').send(m3));
  expect(res.status).toBe(200);
  const m4 = cbor(res);
  expect(open(hs.k2.s2cKeyConfirmation, bytesOf(m4, 'AEAD_ct_key_confirmation'))!.equals(sha256(hs.m1, hs.m2, m3))).toBe(true);
  return hs;
}

function frame(hs: { k2: ReturnType<typeof deriveK2> }, plaintext: Buffer, o: { counter?: bigint; env?: number; mode?: number; keyId?: Buffer; version?: number } = {}): Buffer {
  return encryptFrame(hs.k2.c2sAppData, { version: o.version ?? 2, env: o.env ?? 0, mode: o.mode ?? 1, requestCounter: o.counter ?? 1n, keyId: o.keyId ?? hs.k2.keyId }, o.counter ?? 1n, plaintext);
}

const postFrame = (cid: string, body: Buffer, app = h.app) => raw(request(app).post(cid).set('Content-Type', 'application/octet-stream').set('Accept', 'application/octet-stream').send(body));

describe('the handshake and encrypted requests', () => {
  test('discovery advertises svc_asl_use; CertData of the current keys answers CBOR, another version 404, POST 405', async () => {
    expect((await request(h.app).get('/.well-known/oauth-protected-resource')).body.svc_asl_use).toBe('supported');
    const hs = await handshakeByHand();
    const signedKeys = decodeMap(open(hs.k1.s2c, bytesOf(decodeMap(hs.m2, 'M2'), 'AEAD_ct'))!, 'signed');
    const version = `${bytesOf(signedKeys, 'cert_hash').toString('hex')}-${signedKeys.cdv as number}`;
    const certData = await raw(request(h.app).get(`/CertData.${version}`));
    expect(certData.status).toBe(200);
    expect(certData.headers['content-type']).toMatch(/^application\/cbor/);
    expect(Object.keys(cbor(certData))).toEqual(['cert', 'ca', 'rca_chain']);
    expect((await request(h.app).get(`/CertData.${'0'.repeat(64)}-1`)).status).toBe(404);
    expect((await request(h.app).post(`/CertData.${version}`)).status).toBe(405);
    expect(hs.cid).toMatch(/^\/ASL\/[0-9a-f-]{36}$/);
  });

  test('the reference client: M1-M4, then an encrypted slot search with DPoP inside answers the inner 200 Bundle', async () => {
    const c = channel();
    const res = await c.send(await signed('GET', '/fhir/Slot?schedule=Schedule/Schedule-Read-Example&status=free&_count=2'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
    expect((res.json as { resourceType: string; entry: unknown[] }).resourceType).toBe('Bundle');
    expect((res.json as { entry: unknown[] }).entry.length).toBeGreaterThan(0);
    // The same session carries the next request (counter 2).
    expect((await c.send(await signed('GET', '/fhir/Schedule'))).status).toBe(200);
  });

  test('an inner request with a bad DPoP proof: the outer answer is 200, the inner one 401', async () => {
    const c = channel();
    const req = await signed('GET', '/fhir/Slot');
    req.headers.dpop = await createDpopProof(t.dpopKey, { method: 'GET', url: `${PUBLIC_URL}/fhir/Patient`, accessToken: t.accessToken });
    const res = await c.send(req);
    expect(res.status).toBe(401);
    expect((res.json as { error: string }).error).toBe('invalid_dpop_proof');
  });

  test('an inner POST the enforcement point refuses is answered inside the tunnel (403 insufficient_scope; bodies that pass: asl-bodies.test.ts)', async () => {
    const c = channel();
    const slot = { resourceType: 'Slot', schedule: { reference: 'Schedule/Schedule-Read-Example' }, status: 'free', start: '2027-10-01T09:00:00Z', end: '2027-10-01T09:20:00Z' };
    const req = await signed('POST', '/fhir/Slot');
    const res = await c.send({ ...req, headers: { ...req.headers, 'content-type': 'application/fhir+json' }, body: JSON.stringify(slot) } as never);
    // A requestor may not create slots: the enforcement point said so inside the tunnel.
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toMatch(/insufficient_scope/);
  });

  test('a replayed request counter is refused (400, code 101); a new counter goes on', async () => {
    const hs = await established();
    const inner = serializeRequest(await signed('GET', '/fhir/Slot?_count=1'));
    const first = await postFrame(hs.cid, frame(hs, inner, { counter: 7n }));
    expect(first.status).toBe(200);
    const answer = first.body as Buffer;
    expect(decryptFrame(hs.k2.s2cAppData, answer)!.toString()).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.readBigUInt64BE(3)).toBe(7n);
    const again = await postFrame(hs.cid, frame(hs, inner, { counter: 7n }));
    expect(again.status).toBe(400);
    expect(cbor(again)).toMatchObject({ MessageType: 'Error', ErrorCode: 101 });
    const next = await postFrame(hs.cid, frame(hs, serializeRequest(await signed('GET', '/fhir/Slot?_count=1')), { counter: 8n }));
    expect(next.status).toBe(200);
  });

  test('a session continues on a second app instance sharing the store (keys sealed, counters shared)', async () => {
    const second = composeTerminus({ ...(await createTestContext({ env: { GUARD_ENFORCEMENT: 'on', PUBLIC_URL, ASL_MODE: 'supported' }, db: h.ctx.db })), redis: h.ctx.redis });
    try {
      const hs = await established(h.app);
      const inner = serializeRequest(await signed('GET', '/fhir/Slot?_count=1'));
      const there = await postFrame(hs.cid, frame(hs, inner, { counter: 1n }), second.app);
      expect(there.status).toBe(200);
      expect(decryptFrame(hs.k2.s2cAppData, there.body as Buffer)!.toString()).toMatch(/^HTTP\/1\.1 200 /);
      const replayHere = await postFrame(hs.cid, frame(hs, inner, { counter: 1n }), h.app);
      expect(cbor(replayHere).ErrorCode).toBe(101);
      // Response frames are numbered across instances (each takes its own block from the store): no IV repeats.
      const ivs = [(there.body as Buffer).readBigUInt64BE(47)];
      for (let i = 2n; i < 6n; i++) {
        const app = i % 2n === 0n ? h.app : second.app;
        const res = await postFrame(hs.cid, frame(hs, serializeRequest(await signed('GET', '/fhir/Slot?_count=1')), { counter: i }), app);
        expect(res.status).toBe(200);
        ivs.push((res.body as Buffer).readBigUInt64BE(47));
      }
      expect(new Set(ivs).size).toBe(ivs.length);
    } finally {
      await second.stop();
    }
  });
});

describe('the error rows', () => {
  test('M1 with another content type is 415; without a CBOR Accept 406', async () => {
    expect((await request(h.app).post('/ASL').set('Content-Type', 'application/json').send('{}')).status).toBe(415);
    const res = await request(h.app).post('/ASL').set('Content-Type', 'application/cbor').set('Accept', 'application/json').send(Buffer.from([0xa0]));
    expect(res.status).toBe(406);
    expect(res.text).toBe('Not Acceptable: application/cbor');
  });

  test('garbage CBOR is 400 code 1; an ECDH key with a 31-byte x is 400 code 1 in M1 (libasl) and code 2 in M3', async () => {
    const garbage = await raw(request(h.app).post('/ASL').set('Content-Type', 'application/cbor').send(Buffer.from('ffff00', 'hex')));
    expect(garbage.status).toBe(400);
    expect(cbor(garbage)).toMatchObject({ MessageType: 'Error', ErrorCode: 1 });
    const own = generateHybridKeyPair();
    const short = encodeCbor({ MessageType: 'M1', ECDH_PK: { ...own.publicKeys.ecdh, x: own.publicKeys.ecdh.x.subarray(1) }, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
    expect(cbor(await raw(request(h.app).post('/ASL').set('Content-Type', 'application/cbor').send(short))).ErrorCode).toBe(1);
    const hs = await handshakeByHand();
    const missing = hs.m3For({ inner: { ECDH_ct: { ...hs.enc.ecdhCt, x: hs.enc.ecdhCt.x.subarray(1) }, 'ML-KEM-768_ct': Buffer.from(hs.enc.mlkemCt), ERP: false, ESO: false } });
    const res = await raw(request(h.app).post(hs.cid).set('Content-Type', 'application/cbor').send(missing));
    expect(res.status).toBe(400);
    expect(cbor(res).ErrorCode).toBe(2);
  });

  test('a flipped tag is 403 code 3; a transcript mismatch 403 code 5; an unknown CID 403 code 9', async () => {
    const hs = await handshakeByHand();
    const m3 = decodeMap(hs.m3For(), 'M3');
    const flipped = Buffer.from(bytesOf(m3, 'AEAD_ct'));
    flipped[flipped.length - 1] ^= 1;
    const res3 = await raw(request(h.app).post(hs.cid).set('Content-Type', 'application/cbor').send(encodeCbor({ ...m3, AEAD_ct: flipped })));
    expect([res3.status, cbor(res3).ErrorCode]).toEqual([403, 3]);
    // The handshake is spent: a second M3 on it is an unknown CID.
    const spent = await raw(request(h.app).post(hs.cid).set('Content-Type', 'application/cbor').send(hs.m3For()));
    expect([spent.status, cbor(spent).ErrorCode]).toEqual([403, 9]);
    const other = await handshakeByHand();
    // A key confirmation over another transcript (M1 of someone else).
    const wrongTranscript = encodeCbor({ ...decodeMap(other.m3For(), 'M3'), AEAD_ct_key_confirmation: seal(other.k2.c2sKeyConfirmation, sha256(hs.m1, other.m2)) });
    const res5 = await raw(request(h.app).post(other.cid).set('Content-Type', 'application/cbor').send(wrongTranscript));
    expect([res5.status, cbor(res5).ErrorCode]).toEqual([403, 5]);
    const unknown = await postFrame('/ASL/00000000-0000-4000-8000-000000000000', Buffer.alloc(100, 1));
    expect([unknown.status, cbor(unknown).ErrorCode]).toEqual([403, 9]);
  });

  test('data frames: environment mismatch 4, truncated 6, response mode 7, unknown KeyID 8, flipped tag 3, empty body 101', async () => {
    const hs = await established();
    const inner = serializeRequest(await signed('GET', '/fhir/Slot?_count=1'));
    const code = async (body: Buffer) => {
      const res = await postFrame(hs.cid, body);
      return [res.status, cbor(res).ErrorCode];
    };
    expect(await code(frame(hs, inner, { env: 1, counter: 11n }))).toEqual([403, 4]);
    expect(await code(frame(hs, inner, { counter: 12n }).subarray(0, 60))).toEqual([400, 6]);
    expect(await code(frame(hs, inner, { version: 3, counter: 13n }))).toEqual([400, 6]);
    expect(await code(frame(hs, inner, { mode: 2, counter: 14n }))).toEqual([403, 7]);
    expect(await code(frame(hs, inner, { keyId: Buffer.alloc(32, 7), counter: 15n }))).toEqual([403, 8]);
    const flipped = frame(hs, inner, { counter: 16n });
    flipped[flipped.length - 1] ^= 1;
    expect(await code(flipped)).toEqual([403, 3]);
    expect(await code(Buffer.alloc(0))).toEqual([400, 101]);
    // Not an HTTP request inside, or one to somewhere else than /fhir: 400 code 101.
    expect(await code(frame(hs, Buffer.from('hello'), { counter: 17n }))).toEqual([400, 101]);
    expect(await code(frame(hs, Buffer.from('GET /svc/v1/nonce HTTP/1.1\r\nhost: x\r\n\r\n'), { counter: 18n }))).toEqual([400, 101]);
    expect(await code(frame(hs, Buffer.from('POST /fhir/Slot HTTP/1.1\r\nhost: x\r\ncontent-length: 50\r\n\r\n{"a"'), { counter: 19n }))).toEqual([400, 101]);
    // Still good afterwards.
    expect((await postFrame(hs.cid, frame(hs, inner, { counter: 20n }))).status).toBe(200);
  });

  test('the client re-handshakes once when the server no longer knows its session (unknown CID)', async () => {
    // The sessions are dropped from the store; an instance that never held this one sees an unknown CID.
    const second = composeTerminus({ ...(await createTestContext({ env: { GUARD_ENFORCEMENT: 'on', PUBLIC_URL, ASL_MODE: 'supported' }, db: h.ctx.db })), redis: h.ctx.redis });
    let target = h.app;
    const c = new AslChannel({ origin: PUBLIC_URL, transport: (req) => supertestTransport(target)(req), env: 0, now: () => Math.floor(Date.now() / 1000) });
    try {
      expect((await c.send(await signed('GET', '/fhir/Slot?_count=1'))).status).toBe(200);
      await h.ctx.db.query('DELETE FROM asl_session');
      target = second.app;
      expect((await c.send(await signed('GET', '/fhir/Slot?_count=1'))).status).toBe(200);
    } finally {
      await second.stop();
    }
    const broken = new AslChannel({ origin: PUBLIC_URL, transport: async () => ({ status: 415, headers: {}, text: '', json: undefined, bytes: Buffer.alloc(0) }), env: 0, now: () => 0 });
    await expect(broken.send(await signed('GET', '/fhir/Slot'))).rejects.toBeInstanceOf(AslClientError);
  });
});

describe('ASL_MODE required', () => {
  let r: PepHarness;
  let rt: TestToken;
  beforeAll(async () => {
    r = await pepHarness({ env: { ASL_MODE: 'required' }, fixture: true });
    rt = await institution(r, { telematikId: '1-ASL-REQUIRED' });
  });
  afterAll(() => r?.close());

  test('a plain /fhir request is 403 asl_required; the same through the tunnel is 200; metadata stays public', async () => {
    expect((await request(r.app).get('/.well-known/oauth-protected-resource')).body.svc_asl_use).toBe('required');
    const url = `${PUBLIC_URL}/fhir/Slot`;
    const plain = await request(r.app).get('/fhir/Slot').set('Authorization', `DPoP ${rt.accessToken}`).set('DPoP', await rt.makeProof('GET', url, rt.accessToken));
    expect(plain.status).toBe(403);
    expect(plain.body.error).toBe('asl_required');
    expect((await request(r.app).get('/fhir/metadata')).status).toBe(200);
    const c = new AslChannel({ origin: PUBLIC_URL, transport: supertestTransport(r.app), env: 0, now: () => Math.floor(Date.now() / 1000) });
    const res = await c.send({ method: 'GET', url, headers: { authorization: `DPoP ${rt.accessToken}`, dpop: await rt.makeProof('GET', url, rt.accessToken) } });
    expect(res.status).toBe(200);
  });

  test('the reference client speaks ASL by itself when discovery says required', async () => {
    // rt.client discovered `svc_asl_use: required` at login.
    const res = await rt.client.request('GET', `${PUBLIC_URL}/fhir/Schedule`);
    expect(res.status).toBe(200);
    expect((res.json as { resourceType: string }).resourceType).toBe('Bundle');
  });

  test('with ASL_MODE off there is no /ASL', async () => {
    expect((await request(h.app).post('/ASL').set('Content-Type', 'application/cbor').send(Buffer.from([0xa0]))).status).not.toBe(404);
    const off = await pepHarness();
    try {
      expect((await request(off.app).post('/ASL').set('Content-Type', 'application/cbor').send(Buffer.from([0xa0]))).status).toBe(404);
      expect((await request(off.app).get('/.well-known/oauth-protected-resource')).body.svc_asl_use).toBe('not_supported');
    } finally {
      await off.close();
    }
  });
});

describe('server keys', () => {
  test('a new signed key set after 25 days (each lives 30, as the SDK demands); a handshake finishes with the set it began with', async () => {
    const { AslServerKeys } = await import('../../src/guard/asl/asl-server-keys');
    const { AslServer } = await import('../../src/guard/asl/asl-server');
    const { sharedState } = await import('../../src/guard/state/shared-state');
    const ctx = await createTestContext({ env: { ASL_MODE: 'supported' } });
    try {
      const keys = new AslServerKeys(ctx);
      const server = new AslServer(ctx, keys, sharedState(ctx));
      const first = await keys.currentSet();
      const pub = decodeMap(first.signedPubKeys, 'keys');
      expect((pub.exp as number) - (pub.iat as number)).toBe(30 * 86400);
      // A handshake begins with the first set a minute before the rotation point...
      ctx.clock.advance(25 * 86400_000 - 60_000);
      const own = generateHybridKeyPair();
      const m1 = encodeCbor({ MessageType: 'M1', ECDH_PK: own.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
      const { cid, m2 } = await server.handshake(m1);
      // ...and M3 comes two minutes later, when new handshakes get the second set.
      ctx.clock.advance(120_000);
      const second = await keys.currentSet();
      expect(second.id).not.toBe(first.id);
      const msg2 = decodeMap(m2, 'M2');
      const ssE = decapsulate(own.privateKeys, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
      const k1 = deriveK1(ssE);
      const signedKeys = decodeMap(open(k1.s2c, bytesOf(msg2, 'AEAD_ct'))!, 'signed');
      expect(bytesOf(signedKeys, 'signed_pub_keys').equals(first.signedPubKeys)).toBe(true);
      const enc = encapsulate({ ecdh: pointOf(pub, 'ECDH_PK'), mlkem: bytesOf(pub, 'ML-KEM-768_PK') });
      const k2 = deriveK2(ssE, enc.sharedSecret);
      const aeadCt = seal(k1.c2s, encodeCbor({ ECDH_ct: enc.ecdhCt, 'ML-KEM-768_ct': Buffer.from(enc.mlkemCt), ERP: false, ESO: false }));
      const m3 = encodeCbor({ MessageType: 'M3', AEAD_ct: aeadCt, AEAD_ct_key_confirmation: seal(k2.c2sKeyConfirmation, sha256(m1, m2, aeadCt)) });
      const m4 = decodeMap(await server.finish(cid, m3), 'M4');
      expect(open(k2.s2cKeyConfirmation, bytesOf(m4, 'AEAD_ct_key_confirmation'))!.equals(sha256(m1, m2, m3))).toBe(true);
      // One signer signs both sets: its CertData is served while a set lives; the first set is done after its 30 days.
      expect(second.certHash.equals(first.certHash)).toBe(true);
      expect(await keys.certData(`${second.certHash.toString('hex')}-${second.cdv}`)).toBeDefined();
      ctx.clock.advance(6 * 86400_000);
      expect(await keys.find(first.id)).toBeUndefined();
      expect(await new AslServerKeys(ctx).find(first.id)).toBeUndefined();
    } finally {
      await ctx.db.close();
    }
  });
});

test('a body over 1 MiB is 413 with an ASL error object (code 101), not a 500', async () => {
  const res = await raw(request(h.app).post('/ASL').set('Content-Type', 'application/cbor').send(Buffer.alloc(1024 * 1024 + 10, 0xa0)));
  expect(res.status).toBe(413);
  expect(cbor(res)).toMatchObject({ MessageType: 'Error', ErrorCode: 101 });
});
