import { Decoder, Encoder } from 'cbor-x';
import { MLKEM_CIPHERTEXT_BYTES, MLKEM_PUBLIC_KEY_BYTES, type EcPoint } from './asl-crypto';

/**
 * ASL's CBOR messages (libasl model.rs): definite-length maps with text keys in the order libasl
 * writes them, byte strings for bytes, shortest integers. Only the bytes this side sends are
 * hashed or signed as sent; what it receives is hashed as received, never re-encoded.
 */
const encoder = new Encoder({ useRecords: false, mapsAsObjects: true, variableMapSize: true, tagUint8Array: false });
const decoder = new Decoder({ useRecords: false, mapsAsObjects: true });

export function encodeCbor(value: unknown): Buffer {
  return Buffer.from(encoder.encode(value));
}

/** ASL's error codes and the HTTP status each travels with (zeta-guard-ngx-pep libasl/src/model.rs). */
export const ASL_ERRORS = {
  decoding: { code: 1, status: 400 },
  missingParameters: { code: 2, status: 400 },
  decryptionFailure: { code: 3, status: 403 },
  wrongEnvironment: { code: 4, status: 403 },
  transcript: { code: 5, status: 403 },
  badFormat: { code: 6, status: 400 },
  notRequest: { code: 7, status: 403 },
  unknownKeyId: { code: 8, status: 403 },
  unknownCid: { code: 9, status: 403 },
  badRequest: { code: 101, status: 400 },
  internal: { code: 102, status: 500 },
  illegalTracing: { code: 103, status: 403 },
} as const;

export class AslError extends Error {
  constructor(
    readonly kind: keyof typeof ASL_ERRORS,
    message: string,
  ) {
    super(message);
  }
  get code(): number {
    return ASL_ERRORS[this.kind].code;
  }
  get status(): number {
    return ASL_ERRORS[this.kind].status;
  }
  /** `{"MessageType":"Error","ErrorCode","ErrorMessage"}` */
  body(): Buffer {
    return encodeCbor({ MessageType: 'Error', ErrorCode: this.code, ErrorMessage: this.message });
  }
}

/** One CBOR item, nothing after it; a map. Anything else: code 1 (decoding). */
export function decodeMap(bytes: Buffer, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = decoder.decode(bytes);
  } catch (err) {
    throw new AslError('decoding', `decoding error: ${what} is not one CBOR item (${(err as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Uint8Array) throw new AslError('decoding', `decoding error: ${what} is not a CBOR map`);
  return value as Record<string, unknown>;
}

export function messageTypeIs(m: Record<string, unknown>, type: string): void {
  if (m.MessageType !== type) throw new AslError('decoding', `decoding error: MessageType must be ${type}`);
}

/** A byte string member; absent or of another type: `kind` (missing parameters unless told). */
export function bytesOf(m: Record<string, unknown>, key: string, length?: number, kind: AslError['kind'] = 'missingParameters'): Buffer {
  const v = m[key];
  if (!(v instanceof Uint8Array)) throw new AslError(kind, `missing parameters: ${key} must be a byte string`);
  if (length !== undefined && v.length !== length) throw new AslError(kind, `missing parameters: ${key} must be ${length} bytes`);
  return Buffer.from(v);
}

/** `{crv: "P-256", x: bstr32, y: bstr32}` */
export function pointOf(m: Record<string, unknown>, key: string, kind: AslError['kind'] = 'missingParameters'): EcPoint {
  const p = m[key];
  if (typeof p !== 'object' || p === null || Array.isArray(p)) throw new AslError(kind, `missing parameters: ${key} must be {crv, x, y}`);
  const q = p as Record<string, unknown>;
  if (q.crv !== 'P-256') throw new AslError(kind, `missing parameters: ${key}.crv must be P-256`);
  return { crv: 'P-256', x: bytesOf(q, 'x', 32, kind), y: bytesOf(q, 'y', 32, kind) };
}

/** M1 `{MessageType: "M1", ECDH_PK, ML-KEM-768_PK}` from the client. */
export function decodeM1(bytes: Buffer): { ecdh: EcPoint; mlkem: Buffer } {
  const m = decodeMap(bytes, 'M1');
  messageTypeIs(m, 'M1');
  // libasl answers every key problem of M1 with code 1 (server.rs rewraps them as decoding errors).
  return { ecdh: pointOf(m, 'ECDH_PK', 'decoding'), mlkem: bytesOf(m, 'ML-KEM-768_PK', MLKEM_PUBLIC_KEY_BYTES, 'decoding') };
}

export function encodeM2(ecdhCt: EcPoint, mlkemCt: Uint8Array, aeadCt: Buffer): Buffer {
  return encodeCbor({ MessageType: 'M2', ECDH_ct: ecdhCt, 'ML-KEM-768_ct': Buffer.from(mlkemCt), AEAD_ct: aeadCt });
}

/** M3 `{MessageType: "M3", AEAD_ct, AEAD_ct_key_confirmation}`. */
export function decodeM3(bytes: Buffer): { aeadCt: Buffer; keyConfirmation: Buffer } {
  const m = decodeMap(bytes, 'M3');
  messageTypeIs(m, 'M3');
  return { aeadCt: bytesOf(m, 'AEAD_ct'), keyConfirmation: bytesOf(m, 'AEAD_ct_key_confirmation') };
}

/** M3's inner layer `{ECDH_ct, ML-KEM-768_ct, ERP: false, ESO: false}` (ERP and ESO are not supported). */
export function decodeM3Inner(bytes: Buffer): { ecdhCt: EcPoint; mlkemCt: Buffer } {
  const m = decodeMap(bytes, 'M3 inner layer');
  if (m.ERP !== false || m.ESO !== false) throw new AslError('missingParameters', 'missing parameters: ERP and ESO must be false');
  return { ecdhCt: pointOf(m, 'ECDH_ct'), mlkemCt: bytesOf(m, 'ML-KEM-768_ct', MLKEM_CIPHERTEXT_BYTES) };
}

export function encodeM4(keyConfirmation: Buffer): Buffer {
  return encodeCbor({ MessageType: 'M4', AEAD_ct_key_confirmation: keyConfirmation });
}
