import crypto from 'node:crypto';
import { SignJWT } from 'jose';
import { SVC_ATT_TOKEN_TYP } from '../../../common/oauth';
import type { SigningKeys } from '../../keys/signing-keys';
import type { GuardSettings } from '../../settings';

/**
 * The service attestation token (`svc_att_token`; docs/requirements.md, Hardware attestation): this guard saw the
 * client's hardware attest. Signed with the guard's key (published at `jwks_uri`) so another guard
 * instance can accept it at registration. `cnf.jkt` names the client instance key, so the token
 * registers that key only.
 */
export async function issueAttestationToken(
  keys: SigningKeys,
  settings: GuardSettings,
  now: Date,
  input: { clientId: string; clientJkt: string; attestationKeyJkt: string; platform: string; ttlSec: number },
): Promise<string> {
  const key = await keys.signingKey();
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({
    iss: settings.issuer,
    sub: input.clientId,
    iat,
    exp: iat + input.ttlSec,
    jti: crypto.randomUUID(),
    puk_ak_sig: input.attestationKeyJkt,
    hardware_bound: true,
    platform: input.platform,
    verification_status: 'SUCCESS',
    cnf: { jkt: input.clientJkt },
  })
    .setProtectedHeader({ alg: 'ES256', typ: SVC_ATT_TOKEN_TYP, kid: key.kid })
    .sign(key.privateKey);
}
