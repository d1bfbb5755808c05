import { DPOP_ALGS } from '../dpop/verify-dpop-proof';
import { allowedScopes, patientScopes, type PolicyData } from '../policy';
import type { endpoints, GuardSettings } from '../settings';
import type { GuardDeps } from './deps';
import { versionEntries, type ApiVersion } from '../versions';
import { aslUse } from '../asl/asl-routes';
import { CLIENT_ASSERTION_ALGS } from './client-auth/verify-client-assertion';
import { SUBJECT_TOKEN_ALGS } from './subject-token/verify-subject-token';

/**
 * RFC 8414 authorization-server metadata, with the ZETA members (api_versions_supported, ...);
 * the grant types are those of the token endpoint's registry, the attestation types those of the
 * registry a client may register with here.
 */
export function authorizationServerMetadata(deps: Pick<GuardDeps, 'settings' | 'urls' | 'policyData' | 'attestation' | 'grants'>, versions: ApiVersion[]) {
  const { settings, urls, policyData: data } = deps;
  // `urls` are those of the newest stable major; its base is also its documentation_uri.
  const base = `${settings.issuer}/svc/v${newestStableMajor(versions)}`;
  return {
    issuer: settings.issuer,
    // Authorization code with PAR and PKCE for patient apps (docs/requirements.md, Patients (authorization code flow)).
    authorization_endpoint: urls.authorize,
    pushed_authorization_request_endpoint: urls.par,
    require_pushed_authorization_requests: true,
    redirection_endpoint: urls.redirection,
    openid_providers_endpoint: urls.openidProviders,
    authorization_response_iss_parameter_supported: true,
    token_endpoint: urls.token,
    nonce_endpoint: urls.nonce,
    registration_endpoint: urls.register,
    revocation_endpoint: urls.revoke,
    jwks_uri: urls.jwks,
    scopes_supported: [...allowedScopes(data, true), ...patientScopes(data)],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: deps.grants.types(),
    token_endpoint_auth_methods_supported: ['private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: [...CLIENT_ASSERTION_ALGS],
    revocation_endpoint_auth_methods_supported: ['private_key_jwt'],
    revocation_endpoint_auth_signing_alg_values_supported: [...CLIENT_ASSERTION_ALGS],
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    code_challenge_methods_supported: ['S256'],
    service_documentation: base,
    subject_token_signing_alg_values_supported: [...SUBJECT_TOKEN_ALGS],
    attestation_types_supported: deps.attestation.registrable(),
    api_versions_supported: versionEntries(versions, settings.issuer),
  };
}

/**
 * OpenID Provider metadata for this guard as a workload issuer (docs/requirements.md, Workload token exchange): other guards find
 * its `jwks_uri` here to verify the workload tokens `terminus workload-token` issues.
 */
export function openidConfiguration(settings: GuardSettings, urls: ReturnType<typeof endpoints>, versions: ApiVersion[]) {
  return {
    issuer: settings.issuer,
    authorization_endpoint: urls.authorize,
    token_endpoint: urls.token,
    jwks_uri: urls.jwks,
    response_types_supported: ['token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['ES256'],
    claims_supported: ['iss', 'sub', 'aud', 'iat', 'nbf', 'exp', 'jti'],
  };
}

/** The major discovery advertises: the newest `stable` one, else the newest still served. */
export function newestStableMajor(versions: ApiVersion[]): number {
  const served = versions.filter((v) => v.status !== 'shut_down').sort((a, b) => b.major - a.major);
  return (served.find((v) => v.status === 'stable') ?? served[0])?.major ?? 1;
}

/** RFC 9728 protected-resource metadata for the FHIR base. */
export function protectedResourceMetadata(settings: GuardSettings, urls: ReturnType<typeof endpoints>, data: PolicyData, versions: ApiVersion[]) {
  return {
    resource: settings.resource,
    authorization_servers: [settings.issuer],
    jwks_uri: urls.jwks,
    scopes_supported: [...allowedScopes(data, true), ...patientScopes(data)],
    bearer_methods_supported: ['header'],
    resource_signing_alg_values_supported: ['ES256'],
    resource_name: 'Terminus FHIR appointment repository',
    resource_documentation: `${settings.resource}/metadata`,
    tls_client_certificate_bound_access_tokens: false,
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    dpop_bound_access_tokens_required: true,
    svc_asl_use: aslUse(settings.aslMode),
    api_versions_supported: versionEntries(versions, settings.issuer),
  };
}
