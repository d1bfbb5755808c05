import crypto from 'node:crypto';
import { TPM_ALG, TPM_CURVES, TPM_HASHES } from './tpm-algorithms';
import { TpmReader, TpmStructureError, tpm2b, u16, u32 } from './tpm-reader';

/** A TPMT_PUBLIC of an RSA or ECC key, parsed (TPM 2.0 Part 2 §12.2.4). */
export interface TpmPublic {
  type: 'rsa' | 'ecc';
  nameAlg: number;
  attributes: number;
  authPolicy: Buffer;
  /** TPMT_SYM_DEF_OBJECT: the algorithm (TPM_ALG_NULL for signing keys), key bits and mode. */
  symmetric: { alg: number; keyBits: number; mode: number };
  /** Signing scheme and its hash (TPM_ALG_NULL when the key has none). */
  scheme: { alg: number; hashAlg: number };
  rsa?: { keyBits: number; exponent: number; modulus: Buffer };
  ecc?: { curveId: number; x: Buffer; y: Buffer };
  /** The TPMT_PUBLIC bytes (without the TPM2B size): what the Name hashes. */
  raw: Buffer;
}

/** Parses a TPM2B_PUBLIC (u16 size ‖ TPMT_PUBLIC), refusing anything left over. */
export function parseTpm2bPublic(buf: Buffer, what: string): TpmPublic {
  const outer = new TpmReader(buf, what);
  const inner = outer.sized();
  outer.end();
  return parseTpmtPublic(inner, what);
}

export function parseTpmtPublic(raw: Buffer, what: string): TpmPublic {
  const r = new TpmReader(raw, what);
  const type = r.u16();
  if (type !== TPM_ALG.RSA && type !== TPM_ALG.ECC) throw new TpmStructureError(`${what} is neither an RSA nor an ECC key`);
  const nameAlg = r.u16();
  if (!TPM_HASHES.has(nameAlg) || nameAlg === TPM_ALG.SHA1) throw new TpmStructureError(`${what} has an unsupported name algorithm`);
  const attributes = r.u32();
  const authPolicy = r.sized();
  const symmetric = symDefObject(r);
  const scheme = type === TPM_ALG.RSA ? rsaScheme(r) : eccScheme(r);
  if (type === TPM_ALG.RSA) {
    const keyBits = r.u16();
    const exponent = r.u32();
    const modulus = r.sized();
    r.end();
    if (![2048, 3072, 4096].includes(keyBits) || modulus.length * 8 !== keyBits) throw new TpmStructureError(`${what} has an RSA modulus of an unsupported size`);
    return { type: 'rsa', nameAlg, attributes, authPolicy, symmetric, scheme, rsa: { keyBits, exponent: exponent === 0 ? 65537 : exponent, modulus }, raw };
  }
  const curveId = r.u16();
  const kdf = r.u16();
  if (kdf !== TPM_ALG.NULL) r.u16();
  const x = r.sized();
  const y = r.sized();
  r.end();
  const curve = TPM_CURVES.get(curveId);
  if (!curve) throw new TpmStructureError(`${what} is on an unsupported curve`);
  if (x.length > curve.size || y.length > curve.size) throw new TpmStructureError(`${what} has an ECC point of the wrong size`);
  return { type: 'ecc', nameAlg, attributes, authPolicy, symmetric, scheme, ecc: { curveId, x, y }, raw };
}

function symDefObject(r: TpmReader): TpmPublic['symmetric'] {
  const alg = r.u16();
  if (alg === TPM_ALG.NULL) return { alg, keyBits: 0, mode: TPM_ALG.NULL };
  if (alg !== TPM_ALG.AES) throw new TpmStructureError('only AES protects TPM storage keys here');
  return { alg, keyBits: r.u16(), mode: r.u16() };
}

function rsaScheme(r: TpmReader): TpmPublic['scheme'] {
  const alg = r.u16();
  if (alg === TPM_ALG.NULL) return { alg, hashAlg: TPM_ALG.NULL };
  if (alg !== TPM_ALG.RSASSA && alg !== TPM_ALG.RSAPSS) throw new TpmStructureError('RSA keys must use RSASSA or RSAPSS');
  return { alg, hashAlg: r.u16() };
}

function eccScheme(r: TpmReader): TpmPublic['scheme'] {
  const alg = r.u16();
  if (alg === TPM_ALG.NULL) return { alg, hashAlg: TPM_ALG.NULL };
  if (alg !== TPM_ALG.ECDSA) throw new TpmStructureError('ECC keys must use ECDSA');
  return { alg, hashAlg: r.u16() };
}

/** Name = nameAlg ‖ H_nameAlg(TPMT_PUBLIC) (Part 1 §16). */
export function tpmName(pub: TpmPublic): Buffer {
  const h = TPM_HASHES.get(pub.nameAlg)!;
  return Buffer.concat([u16(pub.nameAlg), crypto.createHash(h.name).update(pub.raw).digest()]);
}

/** Key objects by public area: an AK is verified on every token exchange of its client. */
const keyObjects = new Map<string, crypto.KeyObject>();

/** The public key as a Node key object. */
export function tpmPublicKey(pub: TpmPublic): crypto.KeyObject {
  const id = pub.raw.toString('base64');
  let key = keyObjects.get(id);
  if (!key) {
    key = keyObjectOf(pub);
    if (keyObjects.size >= 1000) keyObjects.clear();
    keyObjects.set(id, key);
  }
  return key;
}

function keyObjectOf(pub: TpmPublic): crypto.KeyObject {
  if (pub.rsa) {
    const e = Buffer.from(pub.rsa.exponent.toString(16).padStart(6, '0'), 'hex');
    return crypto.createPublicKey({ key: { kty: 'RSA', n: pub.rsa.modulus.toString('base64url'), e: stripZeros(e).toString('base64url') }, format: 'jwk' });
  }
  const curve = TPM_CURVES.get(pub.ecc!.curveId)!;
  const pad = (b: Buffer) => Buffer.concat([Buffer.alloc(curve.size - b.length), b]);
  try {
    return crypto.createPublicKey({ key: { kty: 'EC', crv: curve.crv, x: pad(pub.ecc!.x).toString('base64url'), y: pad(pub.ecc!.y).toString('base64url') }, format: 'jwk' });
  } catch {
    throw new TpmStructureError('the ECC point is not on its curve');
  }
}

function stripZeros(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  return b.subarray(i);
}

/**
 * The EK's public area rebuilt from a JWK with the default EK template's parameters assumed (TCG EK
 * Credential Profile 2.x, templates L-1 and H-2/H-3): RSA-2048 and P-256 use SHA-256 + AES-128-CFB,
 * P-384 SHA-384 + AES-256-CFB, P-521 SHA-512 + AES-256-CFB (checked on swtpm for RSA-2048 and
 * P-384). MakeCredential needs only the key, the name algorithm and the symmetric size; the
 * attributes are the template's, the policy is left empty (a JWK does not carry it).
 */
export function ekPublicFromJwk(jwk: Record<string, unknown>): TpmPublic {
  const b64 = (v: unknown, what: string): Buffer => {
    if (typeof v !== 'string' || !/^[A-Za-z0-9_-]+$/.test(v)) throw new TpmStructureError(`puk_ek_enc.${what} must be base64url`);
    return Buffer.from(v, 'base64url');
  };
  const attributes = 0x000300b2;
  if (jwk.kty === 'RSA') {
    const modulus = b64(jwk.n, 'n');
    const e = b64(jwk.e, 'e');
    if (modulus.length !== 256) throw new TpmStructureError('puk_ek_enc: an RSA EK given as JWK must be RSA-2048');
    if (e.length === 0 || e.length > 4) throw new TpmStructureError('puk_ek_enc.e is out of range');
    const exponent = e.readUIntBE(0, e.length);
    const raw = Buffer.concat([
      u16(TPM_ALG.RSA), u16(TPM_ALG.SHA256), u32(attributes), tpm2b(Buffer.alloc(0)),
      u16(TPM_ALG.AES), u16(128), u16(TPM_ALG.CFB), u16(TPM_ALG.NULL), u16(2048), u32(exponent === 65537 ? 0 : exponent), tpm2b(modulus),
    ]);
    return parseTpmtPublic(raw, 'puk_ek_enc');
  }
  if (jwk.kty === 'EC') {
    const template = EC_TEMPLATES[String(jwk.crv)];
    if (!template) throw new TpmStructureError('puk_ek_enc: an EC EK must be on P-256, P-384 or P-521');
    const raw = Buffer.concat([
      u16(TPM_ALG.ECC), u16(template.nameAlg), u32(attributes), tpm2b(Buffer.alloc(0)),
      u16(TPM_ALG.AES), u16(template.aesBits), u16(TPM_ALG.CFB), u16(TPM_ALG.NULL), u16(template.curveId), u16(TPM_ALG.NULL),
      tpm2b(b64(jwk.x, 'x')), tpm2b(b64(jwk.y, 'y')),
    ]);
    return parseTpmtPublic(raw, 'puk_ek_enc');
  }
  throw new TpmStructureError('puk_ek_enc must be an RSA or EC JWK or a base64 TPM2B_PUBLIC');
}

const EC_TEMPLATES: Record<string, { nameAlg: number; aesBits: number; curveId: number }> = {
  'P-256': { nameAlg: TPM_ALG.SHA256, aesBits: 128, curveId: 0x0003 },
  'P-384': { nameAlg: TPM_ALG.SHA384, aesBits: 256, curveId: 0x0004 },
  'P-521': { nameAlg: TPM_ALG.SHA512, aesBits: 256, curveId: 0x0005 },
};
