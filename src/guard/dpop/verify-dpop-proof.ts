import crypto from 'node:crypto';
import type { JWK } from 'jose';
import { claimsOf, decodeCompactJws, MalformedJws, type CompactJws } from '../jose/compact-jws';
import { es256Key, es256Verifies, type Es256Key, type P256Jwk } from '../jose/es256';
import { InvalidDpopProof } from '../errors';
import { stateKey, type SharedState, type SingleUse } from '../state/shared-state';

/** RFC 9449 §4.2: the only proof signature algorithm we accept (FAPI 2.0, ZETA PEP: ES256). */
export const DPOP_ALGS = ['ES256'] as const;

export interface DpopProofCheck {
  /** All `DPoP` header values as received (`req.headersDistinct.dpop`). */
  headerValues: string[] | undefined;
  /** Request method. */
  method: string;
  /** The externally visible URL the request was sent to (built from PUBLIC_URL, never from Host). */
  url: string;
  now: Date;
  /** Proofs older than this (by `iat`) are rejected. */
  maxAgeSec: number;
  /** Tolerance for `iat` in the future. */
  skewSec: number;
  /** When an access token is presented, `ath` must be its hash (RFC 9449 §4.3 step 12). */
  accessToken?: string;
  /** 400 at the token endpoint (§5), 401 at a protected resource (§7.1). */
  errorStatus?: number;
  /**
   * The proof's public key and thumbprint (default: made for this proof). The enforcement point
   * passes a cache: a session sends every proof with the same key, and importing and hashing it
   * cost as much as the signature check.
   */
  keyOf?: (jwk: P256Jwk) => Es256Key;
}

export interface VerifiedDpopProof {
  /** RFC 7638 thumbprint of the proof key: what `cnf.jkt` binds to. */
  jkt: string;
  jwk: JWK;
  jti: string;
  iat: number;
  htm: string;
  htu: string;
  nonce?: string;
  ath?: string;
}

/**
 * Verifies a DPoP proof: the checks of RFC 9449 §4.3, one named step each, in order. Replay
 * (step 11, jti) is `checkDpopReplay`, and the server nonce (step 10) is compared by the caller,
 * because only the caller knows whether it issued one.
 */
export async function verifyDpopProof(check: DpopProofCheck): Promise<VerifiedDpopProof> {
  const fail = (description: string) => new InvalidDpopProof(description, { status: check.errorStatus });
  const jws = exactlyOneHeader(check.headerValues, fail); // §4.3 step 1
  const decoded = wellFormedJwt(jws, fail); // step 2
  const { header } = decoded;
  typIsDpopJwt(header, fail); // step 4
  algIsAllowed(header, fail); // step 5
  const jwk = publicEcJwk(header.jwk, fail); // step 7
  const key = importedKey(jwk, fail, check.keyOf);
  const claims = signatureVerifies(decoded, key, fail); // step 6
  requiredClaimsPresent(claims, fail); // step 3
  htmMatches(claims.htm as string, check.method, fail); // step 8
  htuMatches(claims.htu as string, check.url, fail); // step 9
  iatIsRecent(claims.iat as number, check, fail); // step 11 (time window)
  const nonce = nonceIsWellFormed(claims.nonce, fail);
  if (check.accessToken !== undefined) athMatches(claims.ath, check.accessToken, fail); // step 12
  return {
    jkt: key.jkt,
    jwk,
    jti: claims.jti as string,
    iat: claims.iat as number,
    htm: claims.htm as string,
    htu: claims.htu as string,
    nonce,
    ath: typeof claims.ath === 'string' ? claims.ath : undefined,
  };
}

/** RFC 9449 §11.1: a proof's jti is accepted once per key while the proof could still be valid. */
export async function checkDpopReplay(state: SharedState, now: Date, proof: VerifiedDpopProof, maxAgeSec: number, errorStatus?: number): Promise<void> {
  const use = dpopProofUse(proof, maxAgeSec);
  if (!(await state.firstUse(use.key, use.expiresAt, now))) throw dpopProofReplayed(errorStatus);
}

/** The proof's jti as a single-use value of the shared state (recorded with others in one round trip). */
export function dpopProofUse(proof: VerifiedDpopProof, maxAgeSec: number): SingleUse {
  return { key: stateKey('dpop', `${proof.jkt}:${proof.jti}`), expiresAt: new Date((proof.iat + maxAgeSec + 60) * 1000) };
}

export function dpopProofReplayed(errorStatus?: number): Error {
  return new InvalidDpopProof('DPoP proof jti has been used before', { status: errorStatus });
}

/** base64url(SHA-256(ASCII access token)), the `ath` claim. */
export function accessTokenHash(accessToken: string): string {
  return crypto.createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

/**
 * RFC 9449 §4.3 step 9 with RFC 3986 §6.2.2/6.2.3 normalization: scheme and host lower-cased,
 * default port dropped, query and fragment ignored. Undefined when not an absolute http(s) URL.
 */
function normalizeHtu(value: string): string | undefined {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return undefined;
  return `${u.protocol}//${u.host}${u.pathname}`;
}

type Fail = (description: string) => Error;
type Header = Record<string, unknown>;

function exactlyOneHeader(values: string[] | undefined, fail: Fail): string {
  if (!values || values.length === 0) throw fail('DPoP proof is missing');
  if (values.length > 1) throw fail('more than one DPoP header');
  return values[0].trim();
}

function wellFormedJwt(jws: string, fail: Fail): CompactJws {
  try {
    return decodeCompactJws(jws);
  } catch (err) {
    if (!(err instanceof MalformedJws)) throw err;
    throw fail(err.defect === 'serialization' ? 'DPoP proof is not a JWS in compact serialization' : 'DPoP proof header is not a JSON object');
  }
}

function typIsDpopJwt(header: Header, fail: Fail): void {
  if (header.typ !== 'dpop+jwt') throw fail('DPoP proof typ must be dpop+jwt');
}

function algIsAllowed(header: Header, fail: Fail): void {
  if (typeof header.alg !== 'string' || !(DPOP_ALGS as readonly string[]).includes(header.alg)) {
    throw fail(`DPoP proof alg must be one of ${DPOP_ALGS.join(', ')}`);
  }
}

function publicEcJwk(value: unknown, fail: Fail): P256Jwk {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw fail('DPoP proof header has no jwk');
  const jwk = value as JWK;
  if (jwk.kty === 'oct') throw fail('DPoP proof jwk must not be a symmetric key');
  if ('d' in jwk || 'p' in jwk || 'k' in jwk) throw fail('DPoP proof jwk must not contain a private key');
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string') {
    throw fail('DPoP proof jwk must be an EC P-256 public key');
  }
  return { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y };
}

function importedKey(jwk: P256Jwk, fail: Fail, keyOf: (jwk: P256Jwk) => Es256Key = es256Key): Es256Key {
  try {
    return keyOf(jwk);
  } catch {
    throw fail('DPoP proof signature does not verify with its jwk'); // no point of the curve
  }
}

function signatureVerifies(jws: CompactJws, key: Es256Key, fail: Fail): Record<string, unknown> {
  if (!es256Verifies(jws, key.key)) throw fail('DPoP proof signature does not verify with its jwk');
  try {
    return claimsOf(jws);
  } catch {
    throw fail('DPoP proof payload is not a JSON object');
  }
}

function requiredClaimsPresent(claims: Record<string, unknown>, fail: Fail): void {
  if (typeof claims.jti !== 'string' || claims.jti.length === 0 || claims.jti.length > 256) throw fail('DPoP proof must have a jti string');
  if (typeof claims.htm !== 'string') throw fail('DPoP proof must have an htm string');
  if (typeof claims.htu !== 'string') throw fail('DPoP proof must have an htu string');
  if (typeof claims.iat !== 'number' || !Number.isFinite(claims.iat)) throw fail('DPoP proof must have a numeric iat');
}

function htmMatches(htm: string, method: string, fail: Fail): void {
  if (htm !== method.toUpperCase()) throw fail('DPoP proof htm does not match the request method');
}

function htuMatches(htu: string, url: string, fail: Fail): void {
  const got = normalizeHtu(htu);
  // Naming the expected URL tells a client behind a proxy which origin (PUBLIC_URL) to sign for.
  if (!got || got !== normalizeHtu(url)) throw fail(`DPoP proof htu does not match the request URL: expected ${normalizeHtu(url) ?? url}`);
}

function iatIsRecent(iat: number, check: DpopProofCheck, fail: Fail): void {
  const now = Math.floor(check.now.getTime() / 1000);
  if (iat > now + check.skewSec) throw fail('DPoP proof iat is in the future');
  if (iat < now - check.maxAgeSec) throw fail('DPoP proof iat is not recent enough');
}

function nonceIsWellFormed(nonce: unknown, fail: Fail): string | undefined {
  if (nonce === undefined) return undefined;
  if (typeof nonce !== 'string') throw fail('DPoP proof nonce must be a string');
  return nonce;
}

function athMatches(ath: unknown, accessToken: string, fail: Fail): void {
  if (typeof ath !== 'string') throw fail('DPoP proof must have an ath claim');
  const expected = accessTokenHash(accessToken);
  if (ath.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(ath), Buffer.from(expected))) {
    throw fail('DPoP proof ath does not match the access token');
  }
}

