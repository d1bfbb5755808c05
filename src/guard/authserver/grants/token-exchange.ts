import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import { InvalidRequest, InvalidTarget, UnauthorizedClient } from '../../errors';
import type { PolicyInput } from '../../policy';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import type { GuardDeps } from '../deps';
import { GRANT_TOKEN_EXCHANGE, TOKEN_TYPE_JWT } from '../../../common/oauth';
import { policyAllows } from '../policy-gate';
import { requestedScopes } from '../scope-request';
import { verifySubjectToken } from '../subject-token/verify-subject-token';
import { startSession, type TokenResponse } from '../tokens/token-response';
import { attestClient, authorizationRequest, clientRegistrationData, withAttestationToken } from './attested-client';
import { defineGrant } from './grant';

export interface TokenExchangeRequest {
  params: Map<string, string>;
  proof: VerifiedDpopProof;
  /** The nonce the DPoP proof carried, already consumed. */
  nonce: string;
  auth: AuthenticatedClient;
  ip: string;
}

/** RFC 8693 token exchange by a registered client: an institution card's subject token for an access token (gemSpec_ZETA). */
export const tokenExchangeGrant = defineGrant({
  type: GRANT_TOKEN_EXCHANGE,
  parameters: ['subject_token', 'subject_token_type', 'resource', 'audience', 'scope'],
  nonce: 'required',
  clientAuthentication: 'fresh',
  handle: tokenExchange,
});

/**
 * Token exchange with attestation. The DPoP proof, its nonce and the
 * client assertion were checked by the token endpoint; here, in order: parameters, subject token,
 * client statement, policy, then tokens.
 */
async function tokenExchange(deps: GuardDeps, r: TokenExchangeRequest): Promise<TokenResponse> {
  const { client } = r.auth;
  const subjectToken = parametersArePresent(r.params, deps);
  clientMayUseGrant(client.grantTypes);
  const subject = await verifySubjectToken(deps.ctx, deps.settings, {
    state: deps.state,
    token: subjectToken,
    clientId: client.clientId,
    clientJkt: client.jkt,
    dpopJkt: r.proof.jkt,
    nonce: r.nonce,
    tokenEndpoint: deps.urls.token,
    anchors: await deps.cardIssuers.anchors(),
    ocsp: deps.ocsp,
  });
  const attestation = await attestClient(deps, r.auth, r.nonce);
  const { card } = subject;
  const repositoryOwner = deps.ctx.config.repositoryOwners.includes(card.telematikId);
  const scopes = requestedScopes(r.params, deps.policyData, repositoryOwner);
  const input: PolicyInput = {
    version: '1.1',
    client_registration_data: clientRegistrationData(client, attestation),
    user_info: {
      identifier: card.telematikId,
      professionOID: card.professionOid,
      commonName: card.commonName,
      ...(card.organizationName ? { organizationName: card.organizationName } : {}),
      repository_owner: repositoryOwner,
    },
    authorization_request: authorizationRequest(deps, scopes, GRANT_TOKEN_EXCHANGE, r.ip),
    delegation_context: null,
  };
  const decision = await policyAllows(deps, input);
  const tokens = await startSession(deps, {
    clientId: client.clientId,
    jkt: r.proof.jkt,
    policyInput: input,
    decision,
    attestedPlatform: attestation.platform,
    claims: {
      sub: card.telematikId,
      client_id: client.clientId,
      scope: scopes.join(' '),
      profession_oid: card.professionOid,
      common_name: card.commonName,
      ...(card.organizationName ? { organization_name: card.organizationName } : {}),
      product_id: attestation.productId,
      product_version: attestation.productVersion,
      platform: attestation.platform,
    },
  });
  return withAttestationToken(deps, tokens, client, attestation);
}

function parametersArePresent(params: Map<string, string>, deps: GuardDeps): string {
  const subjectToken = params.get('subject_token');
  if (!subjectToken) throw new InvalidRequest('subject_token is required');
  if (params.get('subject_token_type') !== TOKEN_TYPE_JWT) throw new InvalidRequest(`subject_token_type must be ${TOKEN_TYPE_JWT}`);
  // `resource` (RFC 8707); `audience` is the legacy name the ZETA SDK sends.
  const resource = params.get('resource') ?? params.get('audience');
  if (resource === undefined) throw new InvalidRequest('resource is required');
  if (resource !== deps.settings.resource) throw new InvalidTarget('resource is not served by this authorization server');
  return subjectToken;
}

function clientMayUseGrant(grantTypes: string[]): void {
  if (!grantTypes.includes(GRANT_TOKEN_EXCHANGE)) throw new UnauthorizedClient('this client is not registered for token exchange');
}

