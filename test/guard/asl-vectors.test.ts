/**
 * gematik's libasl unit-test vectors (zeta-guard-ngx-pep@136586c6, libasl/src/server.rs,
 * client.rs, keys.rs) reproduced with this server's ASL primitives: K1, K2, KeyID, both key
 * confirmations, data frames in both directions, the CBOR encoding of the messages, and the
 * signature over a set of signed server keys.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { decapsulate, decryptFrame, deriveK1, deriveK2, encryptFrame, MODE_RESPONSE, open, parseFrameHeader, sha256 } from '../../src/common/asl/asl-crypto';
import { bytesOf, decodeM1, decodeM3, decodeM3Inner, decodeMap, encodeCbor, pointOf } from '../../src/common/asl/asl-messages';

const V = JSON.parse(fs.readFileSync(path.join(__dirname, '../fixtures/asl/libasl-vectors.json'), 'utf8'));
const hex = (s: string) => Buffer.from(s, 'hex');
const server = { ecdh: hex(V.server_static_ecdh_sk), mlkem: new Uint8Array(hex(V.server_static_mlkem768_sk)) };

describe('libasl server vectors (server.rs)', () => {
  const h = V.finished_handshake;
  const [m1, m2, m3, ssE] = [hex(h.M1), hex(h.M2), hex(h.M3), hex(h.SS_E)];

  test('M1, M2 and M3 decode, and encode again byte for byte (definite maps, libasl key order)', () => {
    for (const m of [m1, m2, m3]) expect(encodeCbor(decodeMap(m, 'message')).equals(m)).toBe(true);
    const client = decodeM1(m1);
    expect(client.ecdh.x).toHaveLength(32);
    expect(client.mlkem).toHaveLength(1184);
  });

  test('it_handles_finished_handshake: K1 opens M3, the static keys give ss_s, K2 gives the KeyID and app keys, the client key confirmation matches the transcript', () => {
    const k1 = deriveK1(ssE);
    expect([k1.c2s.toString('hex'), k1.s2c.toString('hex')]).toEqual([h.K1_c2s_derived, h.K1_s2c_derived]);
    const { aeadCt, keyConfirmation } = decodeM3(m3);
    const inner = decodeM3Inner(open(k1.c2s, aeadCt)!);
    const ssS = decapsulate(server, inner.ecdhCt, inner.mlkemCt);
    const k2 = deriveK2(ssE, ssS);
    expect(k2.keyId.toString('hex')).toBe(h.KeyID);
    expect(k2.c2sAppData.toString('hex')).toBe(h.K2_c2s_app_data);
    expect(k2.s2cAppData.toString('hex')).toBe(h.K2_s2c_app_data);
    expect(open(k2.c2sKeyConfirmation, keyConfirmation)!.equals(sha256(m1, m2, aeadCt))).toBe(true);
    // A flipped byte anywhere in the transcript no longer matches.
    const other = Buffer.from(m1);
    other[10] ^= 1;
    expect(open(k2.c2sKeyConfirmation, keyConfirmation)!.equals(sha256(other, m2, aeadCt))).toBe(false);
  });

  test('M2 opens with K1 (server → client) and holds the signed server keys', () => {
    const msg = decodeMap(m2, 'M2');
    const inner = decodeMap(open(deriveK1(ssE).s2c, bytesOf(msg, 'AEAD_ct'))!, 'signed keys');
    const keys = decodeMap(bytesOf(inner, 'signed_pub_keys'), 'keys');
    expect(Buffer.concat([pointOf(keys, 'ECDH_PK').x, pointOf(keys, 'ECDH_PK').y]).toString('hex')).toBe(V.server_static_ecdh_pk);
    expect(bytesOf(keys, 'ML-KEM-768_PK').toString('hex')).toBe(V.server_static_mlkem768_pk);
  });

  test('it_decrypts_request: the request frame decrypts to "Hello World" with request counter 1', () => {
    const d = V.decrypts_request;
    const frame = hex(d.frame);
    const header = parseFrameHeader(frame);
    expect([header.version, header.env, header.mode, header.requestCounter]).toEqual([2, 0, 1, BigInt(d.request_counter)]);
    expect(header.keyId.toString('hex')).toBe(d.KeyID);
    expect(decryptFrame(hex(d.K2_c2s_app_data), frame)!.toString('hex')).toBe(d.plaintext);
    const flipped = Buffer.from(frame);
    flipped[flipped.length - 1] ^= 1;
    expect(decryptFrame(hex(d.K2_c2s_app_data), flipped)).toBeUndefined();
  });

  test('it_encrypts_response: the response header echoes the request counter; the frame decrypts with the same key', () => {
    const d = V.decrypts_request;
    const key = hex(d.K2_c2s_app_data);
    const frame = encryptFrame(key, { version: 2, env: 0, mode: MODE_RESPONSE, requestCounter: 1n, keyId: hex(d.KeyID) }, 1n, Buffer.from('Hello World'));
    expect(frame.subarray(0, 43).toString('hex')).toBe(V.encrypts_response.header_prefix.slice(0, 86));
    // IV = 4 random bytes ‖ the encryption counter.
    expect(frame.readBigUInt64BE(43 + 4)).toBe(1n);
    expect(decryptFrame(key, frame)!.toString()).toBe('Hello World');
  });
});

describe('libasl client vectors (client.rs)', () => {
  test('it_continues_handshake: the client keys decapsulate M2; with its M3 the server static keys give the expected KeyID and app keys', () => {
    const c = V.client_continues_handshake;
    const [m1, m2, m3] = [hex(c.M1), hex(c.M2), hex(c.M3)];
    const msg2 = decodeMap(m2, 'M2');
    const ssE = decapsulate({ ecdh: hex(c.client_ecdh_sk), mlkem: new Uint8Array(hex(c.client_mlkem_sk)) }, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
    const k1 = deriveK1(ssE);
    const { aeadCt, keyConfirmation } = decodeM3(m3);
    const inner = decodeM3Inner(open(k1.c2s, aeadCt)!);
    const k2 = deriveK2(ssE, decapsulate(server, inner.ecdhCt, inner.mlkemCt));
    expect([k2.keyId.toString('hex'), k2.c2sAppData.toString('hex'), k2.s2cAppData.toString('hex')]).toEqual([c.KeyID, c.K2_c2s_app_data, c.K2_s2c_app_data]);
    expect(open(k2.c2sKeyConfirmation, keyConfirmation)!.equals(sha256(m1, m2, aeadCt))).toBe(true);
  });

  test('it_encrypts_request: the expected frame has our header layout and decrypts to its plaintext', () => {
    const c = V.client_encrypts_request;
    const frame = hex(c.frame);
    expect(parseFrameHeader(frame)).toMatchObject({ version: 2, env: 0, mode: 1, requestCounter: 1n });
    expect(frame.readBigUInt64BE(43 + 4)).toBe(1n);
    expect(decryptFrame(hex(c.K2_c2s_app_data), frame)!.toString('hex')).toBe(c.plaintext);
  });

  test('it_decrypts_response: "Right back at ya!"', () => {
    const c = V.client_decrypts_response;
    const frame = hex(c.frame);
    expect(parseFrameHeader(frame)).toMatchObject({ mode: 2, requestCounter: 1n });
    expect(decryptFrame(hex(c.K2_s2c_app_data), frame)!.toString('hex')).toBe(c.plaintext);
  });
});

describe('libasl keys vectors (keys.rs)', () => {
  test('it_verifies_signed_asl_keys: cert_hash is the signer certificate hash and ES256 (raw r‖s) verifies over signed_pub_keys', () => {
    const s = decodeMap(hex(V.signed_asl_keys.cbor), 'SignedAslKeys');
    const cert = hex(V.signer_cert);
    expect(bytesOf(s, 'cert_hash').equals(crypto.createHash('sha256').update(cert).digest())).toBe(true);
    const signed = bytesOf(s, 'signed_pub_keys');
    const signature = bytesOf(s, 'signature-ES256');
    const key = new crypto.X509Certificate(cert).publicKey;
    expect(signature).toHaveLength(64);
    expect(crypto.verify('sha256', signed, { key, dsaEncoding: 'ieee-p1363' }, signature)).toBe(true);
    const tampered = Buffer.from(signed);
    tampered[tampered.length - 1] ^= 1;
    expect(crypto.verify('sha256', tampered, { key, dsaEncoding: 'ieee-p1363' }, signature)).toBe(false);
    expect(decodeMap(signed, 'AslKeys')).toMatchObject({ iat: expect.any(Number), exp: expect.any(Number) });
  });
});
