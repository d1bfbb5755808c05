import crypto from 'node:crypto';
import { SignJWT, compactVerify, decodeProtectedHeader, importJWK, type JWTPayload } from 'jose';

type Claims = JWTPayload;
import { InvalidToken } from '../../errors';
import type { SigningKeys } from '../../keys/signing-keys';
import type { GuardSettings } from '../../settings';

/** Identity and client data every access token of a session carries (issue 5 point 7, access-guard.md 2.6). */
export interface SessionClaims {
  sub: string;
  client_id: string;
  scope: string;
  profession_oid: string;
  common_name: string;
  organization_name?: string;
  product_id: string;
  product_version: string;
  platform: string;
}

export interface AccessTokenPayload extends SessionClaims {
  iss: string;
  aud: string[];
  exp: number;
  iat: number;
  jti: string;
  sid: string;
  cnf: { jkt: string };
}

/** Signs an RFC 9068 access token (`typ: at+jwt`, ES256, `kid`) bound to the DPoP key by `cnf.jkt`. */
export async function issueAccessToken(
  keys: SigningKeys,
  settings: GuardSettings,
  now: Date,
  input: { claims: SessionClaims; sid: string; jkt: string; ttlSec: number },
): Promise<{ token: string; payload: AccessTokenPayload }> {
  const key = await keys.signingKey();
  const iat = Math.floor(now.getTime() / 1000);
  const payload: AccessTokenPayload = {
    iss: settings.issuer,
    aud: [settings.resource],
    iat,
    exp: iat + input.ttlSec,
    jti: crypto.randomUUID(),
    sid: input.sid,
    cnf: { jkt: input.jkt },
    ...input.claims,
  };
  const token = await new SignJWT(payload as unknown as Claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid }).sign(key.privateKey);
  return { token, payload };
}

/**
 * Verifies an access token issued by this AS: typ, alg, kid among the published keys, signature,
 * iss, aud, exp. The enforcement proxy adds the DPoP binding (`cnf.jkt`, `ath`) on top.
 */
export async function verifyAccessToken(keys: SigningKeys, settings: GuardSettings, now: Date, token: string): Promise<AccessTokenPayload> {
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(token) as Record<string, unknown>;
  } catch {
    throw new InvalidToken('the access token is malformed');
  }
  if (header.typ !== 'at+jwt' || header.alg !== 'ES256' || typeof header.kid !== 'string') throw new InvalidToken('the access token header is not ours');
  const jwk = await keys.publicKey(header.kid);
  if (!jwk) throw new InvalidToken('the access token is signed with an unknown key');
  let payload: AccessTokenPayload;
  try {
    const { payload: raw } = await compactVerify(token, await importJWK(jwk, 'ES256'), { algorithms: ['ES256'] });
    payload = JSON.parse(Buffer.from(raw).toString('utf8')) as AccessTokenPayload;
  } catch {
    throw new InvalidToken('the access token signature does not verify');
  }
  const t = Math.floor(now.getTime() / 1000);
  if (payload.iss !== settings.issuer) throw new InvalidToken('the access token has another issuer');
  if (!Array.isArray(payload.aud) || !payload.aud.includes(settings.resource)) throw new InvalidToken('the access token is for another audience');
  if (typeof payload.exp !== 'number' || payload.exp <= t) throw new InvalidToken('the access token has expired');
  if (typeof payload.cnf?.jkt !== 'string') throw new InvalidToken('the access token is not DPoP-bound');
  return payload;
}
