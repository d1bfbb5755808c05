import { verifyClientStatement, type AttestationResult } from '../../attestation';
import type { PolicyInput } from '../../policy';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import type { ClientRecord } from '../clients/client-store';
import type { GuardDeps } from '../deps';
import { issueAttestationToken } from '../tokens/attestation-token';
import type { TokenResponse } from '../tokens/token-response';

/**
 * The client's posture, proven by the `client_statement` of its assertion, at every grant that
 * starts a session (token exchange, authorization code): the DPoP nonce it was bound to is
 * already consumed.
 */
export function attestClient(deps: GuardDeps, auth: AuthenticatedClient, nonce: string): Promise<AttestationResult> {
  const { client } = auth;
  return verifyClientStatement(
    auth.claims.client_statement,
    {
      ctx: deps.ctx,
      settings: deps.settings,
      clientId: client.clientId,
      clientJkt: client.jkt,
      nonce,
      registeredPlatform: client.platform,
      registration: { attestationType: client.attestationType, attestation: client.attestation },
    },
    deps.attestation,
  );
}

/** The policy input's `client_registration_data` (gematik policy-engine-input.yaml). */
export function clientRegistrationData(client: ClientRecord, attestation: AttestationResult): PolicyInput['client_registration_data'] {
  return {
    client_id: client.clientId,
    product_id: attestation.productId,
    product_version: attestation.productVersion,
    platform: attestation.platform,
    posture_type: attestation.postureType,
    registration_timestamp: Math.floor(client.issuedAt.getTime() / 1000),
    attestation_timestamp: attestation.attestationTimestamp,
    device_info: { os: attestation.os, os_version: attestation.osVersion },
    attestation_result: { ...attestation.result, ...registrationAttestation(client.attestation) },
  };
}

/**
 * The policy input's `authorization_request` of a grant that starts a session at this resource
 * (token exchange, workload exchange, authorization code): the one writer of it.
 */
export function authorizationRequest(deps: GuardDeps, scopes: string[], grantType: string, ip: string): PolicyInput['authorization_request'] {
  const { resource } = deps.settings;
  return { scopes, resource, audience: [resource], grant_type: grantType, ip_address: ip, http_method: 'POST' };
}

/** After a hardware attestation the tokens come with a service attestation token (docs/requirements.md, Hardware attestation). */
export async function withAttestationToken(deps: GuardDeps, tokens: TokenResponse, client: ClientRecord, attestation: AttestationResult): Promise<TokenResponse> {
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

/** What a registration by service attestation token proved, for the policy (`attestation_result.svc_attestation_token`). */
function registrationAttestation(attestation: Record<string, unknown> | undefined): Record<string, unknown> {
  const svc = attestation?.svc_attestation_token as { iss: string; platform: string } | undefined;
  return svc ? { svc_attestation_token: { iss: svc.iss, platform: svc.platform, hardware_bound: true } } : {};
}
