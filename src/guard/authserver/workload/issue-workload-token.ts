import crypto from 'node:crypto';
import { SignJWT } from 'jose';
import type { SigningKeys } from '../../keys/signing-keys';
import type { GuardSettings } from '../../settings';

/** docs/requirements.md, Workload token exchange: workload tokens live at most an hour. */
export const MAX_WORKLOAD_TOKEN_TTL_SEC = 3600;

/** A subject, audience or lifetime a workload token cannot have. */
export class InvalidWorkloadRequest extends Error {}

/**
 * This guard as a workload issuer (docs/requirements.md, Workload token exchange): a JWT `{iss, sub, aud, iat, nbf, exp, jti}` with
 * header `{alg: ES256, kid, typ: JWT}`, signed with the key published at `jwks_uri`, for another
 * guard's token endpoint (`aud`) to exchange. `typ` keeps it from passing as one of our access
 * tokens (`at+jwt`).
 */
export async function issueWorkloadToken(keys: SigningKeys, settings: GuardSettings, now: Date, o: { sub: string; aud: string[]; ttlSec: number }): Promise<string> {
  if (typeof o.sub !== 'string' || !o.sub) throw new InvalidWorkloadRequest('a workload token needs a subject (--sub)');
  if (!Array.isArray(o.aud) || o.aud.length === 0 || !o.aud.every((a) => typeof a === 'string' && a)) throw new InvalidWorkloadRequest('a workload token needs an audience (--aud)');
  if (!(Number.isInteger(o.ttlSec) && o.ttlSec > 0 && o.ttlSec <= MAX_WORKLOAD_TOKEN_TTL_SEC)) throw new InvalidWorkloadRequest(`the lifetime (--ttl) must be 1 to ${MAX_WORKLOAD_TOKEN_TTL_SEC} seconds`);
  // The current signing key, never one of its own: every token of this guard verifies with the key
  // set jwks_uri already publishes, and minting adds nothing to it.
  const key = await keys.signingKey();
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'JWT' })
    .setIssuer(settings.issuer)
    .setSubject(o.sub)
    .setAudience(o.aud.length === 1 ? o.aud[0] : o.aud)
    .setIssuedAt(iat)
    .setNotBefore(iat)
    .setExpirationTime(iat + o.ttlSec)
    .sign(key.privateKey);
}
