import crypto from 'node:crypto';
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js';

/**
 * The ASL primitives (gemSpec_Krypt §8 as gematik's libasl implements them, zeta-guard-ngx-pep
 * libasl/src/util.rs): ECDH-KEM on P-256 (ciphertext = the ephemeral public point, shared secret
 * = its x coordinate) beside ML-KEM-768, HKDF-SHA256 with 32 zero bytes of salt and no info,
 * AES-256-GCM blobs `IV ‖ ciphertext ‖ tag` without AAD in the handshake.
 */

/** An uncompressed P-256 point as ASL carries it: `{crv: "P-256", x, y}` with 32-byte coordinates. */
export interface EcPoint {
  crv: 'P-256';
  x: Buffer;
  y: Buffer;
}

export interface HybridPublicKeys {
  ecdh: EcPoint;
  mlkem: Uint8Array;
}

export interface HybridPrivateKeys {
  /** P-256 private scalar, 32 bytes. */
  ecdh: Buffer;
  /** ML-KEM-768 decapsulation key, 2400 bytes. */
  mlkem: Uint8Array;
}

export interface HybridKeyPair {
  publicKeys: HybridPublicKeys;
  privateKeys: HybridPrivateKeys;
}

export const MLKEM_PUBLIC_KEY_BYTES = 1184;
export const MLKEM_CIPHERTEXT_BYTES = 1088;

export function generateHybridKeyPair(): HybridKeyPair {
  const ecdh = crypto.createECDH('prime256v1');
  ecdh.generateKeys();
  const kem = ml_kem768.keygen();
  return { publicKeys: { ecdh: pointOf(ecdh.getPublicKey()), mlkem: kem.publicKey }, privateKeys: { ecdh: ecdh.getPrivateKey(), mlkem: kem.secretKey } };
}

/** The public point of a P-256 private scalar. */
export function ecdhPublicOf(privateKey: Buffer): EcPoint {
  const ecdh = crypto.createECDH('prime256v1');
  ecdh.setPrivateKey(privateKey);
  return pointOf(ecdh.getPublicKey());
}

function pointOf(uncompressed: Buffer): EcPoint {
  return { crv: 'P-256', x: uncompressed.subarray(1, 33), y: uncompressed.subarray(33, 65) };
}

function uncompressed(p: EcPoint): Buffer {
  return Buffer.concat([Buffer.from([4]), p.x, p.y]);
}

/** Encapsulates to a peer's hybrid public keys: the ciphertexts and the 64-byte shared secret `ecdh_x ‖ mlkem_ss`. */
export function encapsulate(peer: HybridPublicKeys): { ecdhCt: EcPoint; mlkemCt: Uint8Array; sharedSecret: Buffer } {
  const eph = crypto.createECDH('prime256v1');
  eph.generateKeys();
  const ecdhSs = eph.computeSecret(uncompressed(peer.ecdh));
  const { cipherText, sharedSecret } = ml_kem768.encapsulate(peer.mlkem);
  return { ecdhCt: pointOf(eph.getPublicKey()), mlkemCt: cipherText, sharedSecret: Buffer.concat([ecdhSs, Buffer.from(sharedSecret)]) };
}

/** Decapsulates ciphertexts addressed to our hybrid keys: `ecdh_x ‖ mlkem_ss`. Throws on a point off the curve. */
export function decapsulate(own: HybridPrivateKeys, ecdhCt: EcPoint, mlkemCt: Uint8Array): Buffer {
  const ecdh = crypto.createECDH('prime256v1');
  ecdh.setPrivateKey(own.ecdh);
  const ecdhSs = ecdh.computeSecret(uncompressed(ecdhCt));
  return Buffer.concat([ecdhSs, Buffer.from(ml_kem768.decapsulate(mlkemCt, own.mlkem))]);
}

/** HKDF-SHA256, salt 32 zero bytes, empty info (libasl util.rs `hkdf_expand`). */
export function hkdf(ikm: Buffer, length: number): Buffer {
  return Buffer.from(crypto.hkdfSync('sha256', ikm, Buffer.alloc(32), Buffer.alloc(0), length));
}

/** K1 from `ss_e`: the handshake keys of M2 (server → client) and M3 (client → server). */
export function deriveK1(ssE: Buffer): { c2s: Buffer; s2c: Buffer } {
  const k = hkdf(ssE, 64);
  return { c2s: k.subarray(0, 32), s2c: k.subarray(32, 64) };
}

/** The keys of a session after M3, from `ss_e ‖ ss_s`. */
export interface SessionKeys {
  c2sKeyConfirmation: Buffer;
  c2sAppData: Buffer;
  s2cKeyConfirmation: Buffer;
  s2cAppData: Buffer;
  keyId: Buffer;
}

export function deriveK2(ssE: Buffer, ssS: Buffer): SessionKeys {
  const k = hkdf(Buffer.concat([ssE, ssS]), 160);
  return {
    c2sKeyConfirmation: k.subarray(0, 32),
    c2sAppData: k.subarray(32, 64),
    s2cKeyConfirmation: k.subarray(64, 96),
    s2cAppData: k.subarray(96, 128),
    keyId: k.subarray(128, 160),
  };
}

/** AES-256-GCM as the handshake uses it: `IV (12, random) ‖ ciphertext ‖ tag (16)`, no AAD. */
export function seal(key: Buffer, plaintext: Buffer, iv: Buffer = crypto.randomBytes(12), aad?: Buffer): Buffer {
  const c = crypto.createCipheriv('aes-256-gcm', key, iv);
  if (aad) c.setAAD(aad);
  const body = Buffer.concat([c.update(plaintext), c.final()]);
  return Buffer.concat([iv, body, c.getAuthTag()]);
}

/** Opens a blob of `seal`; undefined when it is too short or the tag does not verify. */
export function open(key: Buffer, blob: Buffer, aad?: Buffer): Buffer | undefined {
  if (blob.length < 28) return undefined;
  try {
    const d = crypto.createDecipheriv('aes-256-gcm', key, blob.subarray(0, 12));
    if (aad) d.setAAD(aad);
    d.setAuthTag(blob.subarray(blob.length - 16));
    return Buffer.concat([d.update(blob.subarray(12, blob.length - 16)), d.final()]);
  } catch {
    return undefined;
  }
}

export const sha256 = (...parts: Buffer[]) => crypto.createHash('sha256').update(Buffer.concat(parts)).digest();

/** Data frames (libasl): a 43-byte header that is also the AAD, then IV, ciphertext and tag. */
export const FRAME_VERSION = 2;
export const FRAME_HEADER_BYTES = 43;
export const MODE_REQUEST = 1;
export const MODE_RESPONSE = 2;

export interface FrameHeader {
  version: number;
  /** 1: production (PU), 0: test. */
  env: number;
  mode: number;
  requestCounter: bigint;
  keyId: Buffer;
}

export function frameHeader(h: FrameHeader): Buffer {
  const b = Buffer.alloc(FRAME_HEADER_BYTES);
  b[0] = h.version;
  b[1] = h.env;
  b[2] = h.mode;
  b.writeBigUInt64BE(h.requestCounter, 3);
  h.keyId.copy(b, 11);
  return b;
}

export function parseFrameHeader(frame: Buffer): FrameHeader {
  return { version: frame[0], env: frame[1], mode: frame[2], requestCounter: frame.readBigUInt64BE(3), keyId: frame.subarray(11, FRAME_HEADER_BYTES) };
}

/** A frame: header, IV = 4 random bytes ‖ the sender's 8-byte encryption counter, AES-256-GCM with the header as AAD. */
export function encryptFrame(key: Buffer, header: FrameHeader, encryptionCounter: bigint, plaintext: Buffer): Buffer {
  const head = frameHeader(header);
  const iv = Buffer.alloc(12);
  crypto.randomBytes(4).copy(iv, 0);
  iv.writeBigUInt64BE(encryptionCounter, 4);
  return Buffer.concat([head, seal(key, plaintext, iv, head)]);
}

/** The plaintext of a frame whose header was checked; undefined when the tag fails. */
export function decryptFrame(key: Buffer, frame: Buffer): Buffer | undefined {
  return open(key, frame.subarray(FRAME_HEADER_BYTES), frame.subarray(0, FRAME_HEADER_BYTES));
}
