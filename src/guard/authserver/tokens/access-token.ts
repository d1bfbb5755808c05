import crypto from 'node:crypto';
import { SignJWT, type JWTPayload } from 'jose';

type Claims = JWTPayload;
import type { SigningKeys } from '../../keys/signing-keys';
import type { GuardSettings } from '../../settings';

/** Identity and client data every access token of a session carries. */
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
  /** A patient's insurance number (authorization-code flow, docs/requirements.md, Patients (authorization code flow)); absent for institutions and workloads. */
  kvnr?: string;
  /** The IdP the patient logged in at. */
  idp?: string;
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
