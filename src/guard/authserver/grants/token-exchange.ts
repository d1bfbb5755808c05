import { verifyClientStatement } from '../../attestation';
import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import { InvalidRequest, InvalidTarget, UnauthorizedClient } from '../../errors';
import type { PolicyInput } from '../../policy';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import { recordAttestation } from '../clients/client-store';
import type { GuardDeps } from '../deps';
import { GRANT_TOKEN_EXCHANGE, TOKEN_TYPE_JWT } from '../../../protocol/oauth';
import { policyAllows } from '../policy-gate';
import { requestedScopes } from '../scope-request';
import { verifySubjectToken } from '../subject-token/verify-subject-token';
import { issueAttestationToken } from '../tokens/attestation-token';
import { startSession, type TokenResponse } from '../tokens/token-response';

export interface TokenExchangeRequest {
  params: Map<string, string>;
  proof: VerifiedDpopProof;
  /** The nonce the DPoP proof carried, already consumed. */
  nonce: string;
  auth: AuthenticatedClient;
  ip: string;
}

/**
 * Token exchange with attestation. The DPoP proof, its nonce and the
 * client assertion were checked by the token endpoint; here, in order: parameters, subject token,
 * client statement, policy, then tokens.
 */
export async function tokenExchange(deps: GuardDeps, r: TokenExchangeRequest): Promise<TokenResponse> {
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
    anchors: deps.anchors(),
    ocsp: deps.ocsp,
  });
  const attestation = await verifyClientStatement(
    r.auth.claims.client_statement,
    {
      ctx: deps.ctx,
      settings: deps.settings,
      clientId: client.clientId,
      clientJkt: client.jkt,
      nonce: r.nonce,
      registeredPlatform: client.platform,
      registration: { attestationType: client.attestationType, attestation: client.attestation },
    },
    deps.postureVerifiers,
  );
  const { card } = subject;
  const repositoryOwner = deps.ctx.config.repositoryOwners.includes(card.telematikId);
  const scopes = requestedScopes(r.params, deps.policyData, repositoryOwner);
  const input: PolicyInput = {
    version: '1.1',
    client_registration_data: {
      client_id: client.clientId,
      product_id: attestation.productId,
      product_version: attestation.productVersion,
      platform: attestation.platform,
      posture_type: attestation.postureType,
      registration_timestamp: Math.floor(client.issuedAt.getTime() / 1000),
      attestation_timestamp: attestation.attestationTimestamp,
      device_info: { os: attestation.os, os_version: attestation.osVersion },
      attestation_result: { ...attestation.result, ...registrationAttestation(client.attestation) },
    },
    user_info: {
      identifier: card.telematikId,
      professionOID: card.professionOid,
      commonName: card.commonName,
      ...(card.organizationName ? { organizationName: card.organizationName } : {}),
      repository_owner: repositoryOwner,
    },
    authorization_request: {
      scopes,
      resource: deps.settings.resource,
      audience: [deps.settings.resource],
      grant_type: GRANT_TOKEN_EXCHANGE,
      ip_address: r.ip,
      http_method: 'POST',
    },
    delegation_context: null,
  };
  const decision = await policyAllows(deps, input);
  await recordAttestation(deps.ctx, client.clientId, attestation.platform);
  const tokens = await startSession(deps, {
    clientId: client.clientId,
    jkt: r.proof.jkt,
    policyInput: input,
    decision,
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
  if (!attestation.hardware) return tokens;
  const svcAttToken = await issueAttestationToken(deps.keys, deps.settings, deps.ctx.now(), {
    clientId: client.clientId,
    clientJkt: client.jkt,
    attestationKeyJkt: attestation.hardware.attestationKeyJkt,
    platform: attestation.platform,
    ttlSec: tokens.refresh_expires_in,
  });
  return { ...tokens, svc_att_token: svcAttToken };
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

/** What a registration by service attestation token proved, for the policy (`attestation_result.svc_attestation_token`). */
function registrationAttestation(attestation: Record<string, unknown> | undefined): Record<string, unknown> {
  const svc = attestation?.svc_attestation_token as { iss: string; platform: string } | undefined;
  return svc ? { svc_attestation_token: { iss: svc.iss, platform: svc.platform, hardware_bound: true } } : {};
}
