import crypto from 'node:crypto';
import { GRANT_AUTHORIZATION_CODE } from '../../../common/oauth';
import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import { InvalidDpopProof, InvalidGrant, InvalidRequest, InvalidTarget, UnauthorizedClient } from '../../errors';
import type { PolicyInput } from '../../policy';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import { recordSession, redeemAuthorization, type AuthorizedUser } from '../code-flow/authorizations';
import type { GuardDeps } from '../deps';
import { policyAllows } from '../policy-gate';
import { revokeSession } from '../tokens/refresh-tokens';
import { startSession, type TokenResponse } from '../tokens/token-response';
import { attestClient, authorizationRequest, clientRegistrationData, withAttestationToken } from './attested-client';
import { defineGrant } from './grant';

export interface AuthorizationCodeRequest {
  params: Map<string, string>;
  proof: VerifiedDpopProof;
  /** The nonce the DPoP proof carried, already consumed. */
  nonce: string;
  auth: AuthenticatedClient;
  ip: string;
}

/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/** RFC 6749 §4.1.3 with PKCE (RFC 7636): a patient app redeems the code of the patient's login. */
export const authorizationCodeGrant = defineGrant({
  type: GRANT_AUTHORIZATION_CODE,
  parameters: ['code', 'code_verifier', 'redirect_uri', 'resource'],
  nonce: 'required',
  clientAuthentication: 'fresh',
  handle: redeemAuthorizationCode,
});

/**
 * `grant_type=authorization_code` (docs/requirements.md, Patients (authorization code flow)): the code this guard sent to the app after the
 * patient's login, redeemed once by the client it was issued to, with the PKCE verifier, the
 * redirect URI of the request, the DPoP key named at PAR (if any), the client's posture, then the
 * policy with the patient as user. A second redemption answers `invalid_grant` and revokes the
 * session the first one started (RFC 6749 §4.1.2, RFC 9700 §4.2.4).
 */
async function redeemAuthorizationCode(deps: GuardDeps, r: AuthorizationCodeRequest): Promise<TokenResponse> {
  const { client } = r.auth;
  const { code, verifier, redirectUri } = parametersArePresent(deps, r.params);
  if (!client.grantTypes.includes(GRANT_AUTHORIZATION_CODE)) throw new UnauthorizedClient('this client is not registered for the authorization_code grant');
  const redeemed = await redeemAuthorization<AuthorizedUser>(deps.ctx, 'code', code);
  if (!redeemed) throw new InvalidGrant('the authorization code is unknown or expired');
  if (redeemed.reused) {
    if (redeemed.reused.sid) await revokeSession(deps.ctx, deps.sessions, redeemed.reused.sid, 'authorization code reused');
    throw new InvalidGrant('the authorization code was redeemed before; the tokens issued for it have been revoked');
  }
  const a = redeemed.data;
  if (redeemed.clientId !== client.clientId) throw new InvalidGrant('the authorization code was issued to another client');
  if (redirectUri !== a.redirectUri) throw new InvalidGrant('redirect_uri differs from the one of the authorization request');
  if (!pkceMatches(verifier, a.codeChallenge)) throw new InvalidGrant('code_verifier does not match the code_challenge');
  if (a.dpopJkt !== undefined && a.dpopJkt !== r.proof.jkt) throw new InvalidDpopProof('the DPoP proof key is not the dpop_jkt of the authorization request');

  const attestation = await attestClient(deps, r.auth, r.nonce);
  const input: PolicyInput = {
    version: '1.1',
    client_registration_data: clientRegistrationData(client, attestation),
    user_info: { identifier: a.user.kvnr, professionOID: '', commonName: a.user.name ?? a.user.kvnr, repository_owner: false, patient: true },
    authorization_request: authorizationRequest(deps, a.scope, GRANT_AUTHORIZATION_CODE, r.ip),
    delegation_context: null,
  };
  const decision = await policyAllows(deps, input);
  const sid = crypto.randomUUID();
  const tokens = await startSession(deps, {
    sid,
    clientId: client.clientId,
    jkt: r.proof.jkt,
    policyInput: input,
    decision,
    attestedPlatform: attestation.platform,
    claims: {
      sub: a.user.kvnr,
      client_id: client.clientId,
      scope: a.scope.join(' '),
      profession_oid: '',
      common_name: a.user.name ?? a.user.kvnr,
      product_id: attestation.productId,
      product_version: attestation.productVersion,
      platform: attestation.platform,
      kvnr: a.user.kvnr,
      idp: a.user.iss,
    },
  });
  if (!(await recordSession(deps.ctx, 'code', code, sid))) {
    // A second redemption raced this one and found no session to revoke yet: this one does.
    await revokeSession(deps.ctx, deps.sessions, sid, 'authorization code reused');
    throw new InvalidGrant('the authorization code was redeemed twice; the tokens issued for it have been revoked');
  }
  return withAttestationToken(deps, tokens, client, attestation);
}

function parametersArePresent(deps: GuardDeps, params: Map<string, string>): { code: string; verifier: string; redirectUri: string } {
  const code = params.get('code');
  if (!code) throw new InvalidRequest('code is required');
  const verifier = params.get('code_verifier');
  if (!verifier) throw new InvalidRequest('code_verifier is required (PKCE)');
  if (!CODE_VERIFIER.test(verifier)) throw new InvalidRequest('code_verifier must be 43 to 128 unreserved characters');
  const redirectUri = params.get('redirect_uri');
  if (!redirectUri) throw new InvalidRequest('redirect_uri is required');
  const resource = params.get('resource');
  if (resource !== undefined && resource !== deps.settings.resource) throw new InvalidTarget('resource is not served by this authorization server');
  return { code, verifier, redirectUri };
}

/** S256: BASE64URL(SHA-256(verifier)) equals the challenge, compared in constant time. */
function pkceMatches(verifier: string, challenge: string): boolean {
  const computed = Buffer.from(crypto.createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && crypto.timingSafeEqual(computed, expected);
}
