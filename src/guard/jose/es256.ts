import crypto from 'node:crypto';
import type { CompactJws } from './compact-jws';

/**
 * An EC P-256 public key ready for the hot path: the node:crypto key object and its RFC 7638
 * thumbprint, made once per key (importing and hashing cost about as much as a signature check).
 */
export interface Es256Key {
  key: crypto.KeyObject;
  /** base64url SHA-256 of the RFC 7638 canonical JWK: what `cnf.jkt` names. */
  jkt: string;
}

/** The coordinates of a public P-256 JWK (already checked to be one). */
export interface P256Jwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
}

/** Imports a P-256 public JWK; throws when the coordinates are no point of the curve. */
export function es256Key(jwk: P256Jwk): Es256Key {
  const key = crypto.createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }, format: 'jwk' });
  // RFC 7638 §3.2: the required members in lexicographic order, no whitespace.
  const canonical = JSON.stringify({ crv: 'P-256', kty: 'EC', x: jwk.x, y: jwk.y });
  return { key, jkt: crypto.createHash('sha256').update(canonical).digest('base64url') };
}

/**
 * RFC 7518 §3.4 ES256 over a decoded compact JWS, on node:crypto directly: the signature is the
 * 64-byte R || S of the signing input's SHA-256 (jose's verify adds about 70 % to this). A header
 * naming a critical extension (`crit`, RFC 7515 §4.1.11) or an unencoded payload (`b64`, RFC 7797)
 * does not verify: this verifier implements neither.
 */
export function es256Verifies(jws: CompactJws, key: crypto.KeyObject): boolean {
  if ('crit' in jws.header || 'b64' in jws.header) return false;
  return jws.signature.length === 64 && crypto.verify('sha256', jws.signingInput, { key, dsaEncoding: 'ieee-p1363' }, jws.signature);
}

/**
 * Imported keys and their thumbprints by their coordinates: a client signs every proof of a
 * session (and every assertion) with one key, and importing and hashing a JWK cost about as much
 * as the signature check. Content-addressed, so never stale; bounded, a full cache starts over.
 */
export class Es256KeyCache {
  private readonly keys = new Map<string, Es256Key>();
  constructor(private readonly size = 10_000) {}

  readonly keyOf = (jwk: P256Jwk): Es256Key => {
    const id = `${jwk.x}.${jwk.y}`;
    let key = this.keys.get(id);
    if (!key) {
      key = es256Key(jwk);
      if (this.keys.size >= this.size) this.keys.clear();
      this.keys.set(id, key);
    }
    return key;
  };
}
