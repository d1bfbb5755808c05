import crypto from 'node:crypto';
import * as asn1js from 'asn1js';
import { decode as decodeCbor } from 'cbor-x';
import type { JWK } from 'jose';
import * as pkijs from 'pkijs';
import { InvalidRequest } from '../../errors';

/**
 * Apple App Attest structures (Apple, "Validating apps that connect to your
 * server"). Written here because no maintained package checks them with a configurable root and
 * the full AAGUID: the attestation object (CBOR), its authenticator data, the credential
 * certificate's nonce extension, and the assertion of later requests.
 */

/** Apple's extension in the credential certificate: SEQUENCE { [1] EXPLICIT OCTET STRING nonce }. */
const NONCE_EXTENSION = '1.2.840.113635.100.8.2';
/** AAGUIDs: `appattest` followed by seven zero bytes in production, `appattestdevelop` in development. */
export const AAGUID_PRODUCTION = Buffer.concat([Buffer.from('appattest', 'ascii'), Buffer.alloc(7)]);
export const AAGUID_DEVELOPMENT = Buffer.from('appattestdevelop', 'ascii');

/** A refusal with the stable token (docs/requirements.md, Mobile clients and e-mail codes) in front of its reason. */
export const refused = (token: string, reason: string) => new InvalidRequest(`${token}: ${reason}`);

export interface AttestationObject {
  credentialCertificate: Buffer;
  intermediates: Buffer[];
  receipt: Buffer;
  authData: Buffer;
}

export interface AuthenticatorData {
  rpIdHash: Buffer;
  flags: number;
  signCount: number;
  aaguid?: Buffer;
  credentialId?: Buffer;
}

const bytes = (v: unknown): Buffer | undefined => (v instanceof Uint8Array ? Buffer.from(v) : undefined);

export function decodeBase64(v: unknown, what: string): Buffer {
  if (typeof v !== 'string' || v.length === 0 || v.length > 200_000 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(v)) throw refused('attestation_format', `${what} must be base64`);
  return Buffer.from(v, /[-_]/.test(v) ? 'base64url' : 'base64');
}

function cbor(data: Buffer, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = decodeCbor(data);
  } catch {
    throw refused('attestation_format', `${what} is not CBOR`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Uint8Array) throw refused('attestation_format', `${what} is not a CBOR map`);
  return value instanceof Map ? Object.fromEntries(value) : (value as Record<string, unknown>);
}

/** `{fmt: "apple-appattest", attStmt: {x5c: [credCert, intermediate...], receipt}, authData}`. */
export function decodeAttestationObject(data: Buffer): AttestationObject {
  const o = cbor(data, 'platform_a_attestation_object');
  if (o.fmt !== 'apple-appattest') throw refused('attestation_format', 'fmt must be apple-appattest');
  const stmt = o.attStmt as { x5c?: unknown; receipt?: unknown } | undefined;
  const x5c = Array.isArray(stmt?.x5c) ? stmt.x5c.map(bytes) : [];
  const authData = bytes(o.authData);
  if (x5c.length < 2 || x5c.some((c) => !c) || !authData) throw refused('attestation_format', 'attStmt.x5c needs the credential certificate and its intermediate, and authData bytes');
  const [credentialCertificate, ...intermediates] = x5c as Buffer[];
  return { credentialCertificate, intermediates, receipt: bytes(stmt?.receipt) ?? Buffer.alloc(0), authData };
}

/** rpIdHash 32 | flags 1 | signCount u32 BE | (attested credential data: aaguid 16 | credIdLen u16 BE | credentialId | COSE key). */
export function parseAuthenticatorData(data: Buffer, attested: boolean): AuthenticatorData {
  if (data.length < 37) throw refused('attestation_format', 'authenticator data is shorter than 37 bytes');
  const d: AuthenticatorData = { rpIdHash: data.subarray(0, 32), flags: data[32], signCount: data.readUInt32BE(33) };
  if (!attested) return d;
  if (!(d.flags & 0x40) || data.length < 55) throw refused('attestation_format', 'authenticator data carries no attested credential data');
  const length = data.readUInt16BE(53);
  if (data.length < 55 + length) throw refused('attestation_format', 'the credential id runs past the authenticator data');
  return { ...d, aaguid: data.subarray(37, 53), credentialId: data.subarray(55, 55 + length) };
}

/** The nonce Apple put into the credential certificate. */
export function certificateNonce(certDer: Buffer): Buffer {
  const cert = pkijs.Certificate.fromBER(new Uint8Array(certDer));
  const ext = cert.extensions?.find((e) => e.extnID === NONCE_EXTENSION);
  if (!ext) throw refused('attestation_nonce_mismatch', 'the credential certificate carries no nonce extension');
  const seq = asn1js.fromBER(ext.extnValue.valueBlock.valueHexView);
  const tagged = seq.result instanceof asn1js.Sequence ? seq.result.valueBlock.value[0] : undefined;
  const inner = tagged instanceof asn1js.Constructed && tagged.idBlock.tagClass === 3 && tagged.idBlock.tagNumber === 1 ? tagged.valueBlock.value[0] : undefined;
  if (!(inner instanceof asn1js.OctetString)) throw refused('attestation_nonce_mismatch', 'the nonce extension is malformed');
  return Buffer.from(inner.valueBlock.valueHexView);
}

/** The credential key as the 65-byte uncompressed point (its SHA-256 is the key id). */
export function uncompressedPoint(key: crypto.KeyObject): Buffer {
  const jwk = key.export({ format: 'jwk' });
  if (jwk.crv !== 'P-256' || !jwk.x || !jwk.y) throw refused('attestation_format', 'the credential key is not a P-256 key');
  return Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url')]);
}

export const sha256 = (...parts: Buffer[]) => crypto.createHash('sha256').update(Buffer.concat(parts)).digest();

/** RFC 7638 canonical form of the client instance key: `{"crv","kty","x","y"}`; its SHA-256 is the client data hash. */
export function canonicalJwk(jwk: JWK): Buffer {
  return Buffer.from(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }), 'utf8');
}

/** ECDSA P-256 / SHA-256 over `data`, the signature DER or raw r‖s. */
export function verifiesEs256(key: crypto.KeyObject, data: Buffer, signature: Buffer): boolean {
  try {
    return crypto.verify('sha256', data, { key, dsaEncoding: signature.length === 64 ? 'ieee-p1363' : 'der' }, signature);
  } catch {
    return false;
  }
}

/** A later request's assertion: CBOR `{signature, authenticatorData}`. */
export function decodeAssertion(data: Buffer): { signature: Buffer; authenticatorData: Buffer } {
  const o = cbor(data, 'platform_a_assertion');
  const signature = bytes(o.signature);
  const authenticatorData = bytes(o.authenticatorData);
  if (!signature || !authenticatorData) throw refused('attestation_format', 'the assertion needs signature and authenticatorData');
  return { signature, authenticatorData };
}
