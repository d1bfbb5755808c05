import crypto from 'node:crypto';
import { SignJWT, calculateJwkThumbprint, exportJWK, type JWK } from 'jose';

/** A P-256 key pair: the client instance key (persistent) or a DPoP key (per session). */
export interface EcKey {
  privateKey: crypto.KeyObject;
  publicJwk: JWK;
  /** RFC 7638 thumbprint. */
  jkt: string;
}

export async function generateEcKey(): Promise<EcKey> {
  const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return ecKeyFrom(privateKey);
}

export async function ecKeyFrom(privateKey: crypto.KeyObject): Promise<EcKey> {
  const full = await exportJWK(crypto.createPublicKey(privateKey));
  const publicJwk: JWK = { kty: full.kty, crv: full.crv, x: full.x, y: full.y };
  return { privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk) };
}

export interface DpopProofOptions {
  method: string;
  url: string;
  nonce?: string;
  /** The access token the proof accompanies: adds `ath`. */
  accessToken?: string;
  /** Seconds since the epoch; default now. */
  iat?: number;
  /** Header or claim overrides for negative tests. */
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}

/** RFC 9449 §4.2 proof: typ dpop+jwt, ES256, public jwk; jti, htm, htu (no query/fragment), iat, nonce, ath. */
export async function createDpopProof(key: EcKey, o: DpopProofOptions): Promise<string> {
  const u = new URL(o.url);
  const claims: Record<string, unknown> = {
    jti: crypto.randomUUID(),
    htm: o.method.toUpperCase(),
    htu: `${u.protocol}//${u.host}${u.pathname}`,
    iat: o.iat ?? Math.floor(Date.now() / 1000),
    ...(o.nonce !== undefined ? { nonce: o.nonce } : {}),
    ...(o.accessToken !== undefined ? { ath: crypto.createHash('sha256').update(o.accessToken, 'ascii').digest('base64url') } : {}),
    ...o.claims,
  };
  return new SignJWT(claims).setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.publicJwk, ...o.header } as never).sign(key.privateKey);
}

export interface ClientAssertionOptions {
  clientId: string;
  /** The token endpoint URL (or the issuer). */
  audience: string;
  clientStatement?: Record<string, unknown>;
  lifetimeSec?: number;
  now?: number;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}

/** private_key_jwt assertion (RFC 7523): iss = sub = client_id, aud, exp, iat, jti. */
export async function createClientAssertion(key: EcKey, o: ClientAssertionOptions): Promise<string> {
  const now = o.now ?? Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: o.clientId,
    sub: o.clientId,
    aud: o.audience,
    iat: now,
    exp: now + (o.lifetimeSec ?? 60),
    jti: crypto.randomUUID(),
    ...(o.clientStatement ? { client_statement: o.clientStatement } : {}),
    ...o.claims,
  };
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', ...o.header } as never).sign(key.privateKey);
}

/** Signs header.payload with a Node key the way JOSE does (ECDSA as r||s), for algorithms jose lacks (BP256R1). */
export function signCompactJws(header: Record<string, unknown>, payload: Record<string, unknown>, key: crypto.KeyObject): string {
  const input = `${b64(JSON.stringify(header))}.${b64(JSON.stringify(payload))}`;
  const alg = header.alg;
  const sig =
    alg === 'PS256'
      ? crypto.sign('sha256', Buffer.from(input), { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })
      : crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${sig.toString('base64url')}`;
}

function b64(s: string): string {
  return Buffer.from(s, 'utf8').toString('base64url');
}
