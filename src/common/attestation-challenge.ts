import crypto from 'node:crypto';

/**
 * attestation_challenge = base64url(SHA-256(thumbprint bytes || nonce bytes)) where the
 * thumbprint is the RFC 7638 SHA-256 thumbprint of the client instance key and both values are
 * base64url-decoded to bytes first (ZETA SDK AttestationApi).
 */
export function attestationChallenge(clientJkt: string, nonce: string): string {
  return crypto
    .createHash('sha256')
    .update(Buffer.concat([Buffer.from(clientJkt, 'base64url'), Buffer.from(nonce, 'base64url')]))
    .digest('base64url');
}
