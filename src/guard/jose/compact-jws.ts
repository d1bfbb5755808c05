/**
 * The one reader of a JWS in compact serialization (RFC 7515 §7.1) for every token the guard
 * checks (access tokens, DPoP proofs, PoPP tokens, subject tokens): three base64url segments, a
 * header that is a JSON object. Signatures are verified by the callers (jose or node:crypto);
 * each turns a `MalformedJws` into its own wire error.
 */
export type JwsDefect = 'serialization' | 'header' | 'payload';

export class MalformedJws extends Error {
  constructor(readonly defect: JwsDefect) {
    super(`malformed JWS: ${defect}`);
  }
}

export interface CompactJws {
  header: Record<string, unknown>;
  /** The payload bytes (a JSON object for JWTs: `claimsOf`). */
  payload: Buffer;
  /** `BASE64URL(header) || '.' || BASE64URL(payload)`, what the signature covers. */
  signingInput: Buffer;
  /** Empty when the third segment is (an unsecured JWS: callers refuse it by `alg`). */
  signature: Buffer;
}

const SEGMENT = /^[A-Za-z0-9_-]*$/;

export function decodeCompactJws(jws: string): CompactJws {
  const parts = jws.split('.');
  if (parts.length !== 3 || !parts[0] || !parts[1] || !parts.every((p) => SEGMENT.test(p))) throw new MalformedJws('serialization');
  return {
    header: jsonObject(Buffer.from(parts[0], 'base64url'), 'header'),
    payload: Buffer.from(parts[1], 'base64url'),
    signingInput: Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'),
    signature: Buffer.from(parts[2], 'base64url'),
  };
}

/** The payload as a JWT claims set: a JSON object. */
export function claimsOf(jws: CompactJws): Record<string, unknown> {
  return jsonObject(jws.payload, 'payload');
}

function jsonObject(bytes: Buffer, defect: JwsDefect): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new MalformedJws(defect);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new MalformedJws(defect);
  return value as Record<string, unknown>;
}
