/**
 * The RFC 7638 canonical form of an EC public JWK (required members in lexicographic order, no
 * whitespace): the bytes whose SHA-256 is the thumbprint, and what the AK or the client key signs
 * as `signed_hash_puk_client_sig` at registration.
 */
export function canonicalEcJwk(jwk: { crv?: unknown; kty?: unknown; x?: unknown; y?: unknown }): Buffer {
  return Buffer.from(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }));
}
