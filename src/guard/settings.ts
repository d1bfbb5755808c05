import { type Config, fhirBaseUrl } from '../config';

/**
 * Every guard knob with its one default and the reason for it. Built from Config so deployments
 * tune rate limits through the environment; tests may pass overrides to guardRouter.
 */
export interface GuardSettings {
  issuer: string;
  /** `aud` of access tokens and `resource` of the protected-resource document. */
  resource: string;
  /** Nonce lifetime: 300 s (ZETA API "Token-Lebenszyklus"; zero-lab 5 min). */
  nonceTtlSec: number;
  /** DPoP proof acceptance window after `iat` (ngx-pep pep_dpop_validity 300 s). */
  dpopMaxAgeSec: number;
  /** Clock skew tolerated for `iat`/`nbf` in the future (8 s ok, > 60 s not). */
  clockSkewSec: number;
  /** Client assertions may not live longer than this (`exp` within 5 min). */
  assertionMaxLifetimeSec: number;
  /** A software client statement older than this is stale. */
  attestationMaxAgeSec: number;
  /** Default token lifetimes when the policy decision names none (ZETA: AT 300 s, RT 86 400 s). */
  accessTokenTtlSec: number;
  refreshTokenTtlSec: number;
  /** Registrations never used for a token exchange disappear after this (Keycloak: 5 min; we allow an hour). */
  pendingClientTtlSec: number;
  /** Sign with a key this long, then a new one; the old stays published until its tokens expire. */
  signingKeyRotationSec: number;
  /** Cache lifetime of the discovery documents (clients cache about 24 h anyway). */
  discoveryMaxAgeSec: number;
  jwksMaxAgeSec: number;
  rateLimit: { perIp: { limit: number; windowSec: number }; perClient: { limit: number; windowSec: number } };
  /** OPA HTTP timeout before failing closed. */
  policyTimeoutMs: number;
  /** ASL_MODE, advertised as `svc_asl_use`. */
  aslMode: Config['aslMode'];
}

export function guardSettings(config: Config, overrides: Partial<GuardSettings> = {}): GuardSettings {
  return {
    issuer: config.publicUrl,
    resource: fhirBaseUrl(config),
    nonceTtlSec: 300,
    dpopMaxAgeSec: 300,
    clockSkewSec: 30,
    assertionMaxLifetimeSec: 300,
    attestationMaxAgeSec: 300,
    accessTokenTtlSec: 300,
    refreshTokenTtlSec: 86_400,
    pendingClientTtlSec: 3_600,
    signingKeyRotationSec: 30 * 86_400,
    discoveryMaxAgeSec: 3_600,
    jwksMaxAgeSec: 300,
    rateLimit: {
      perIp: { limit: config.rateLimitPerIp, windowSec: 60 },
      perClient: { limit: config.rateLimitPerClient, windowSec: 60 },
    },
    policyTimeoutMs: 2_000,
    aslMode: config.aslMode,
    ...overrides,
  };
}

/** The guard's own endpoints live under /svc/v{major}/. */
export function endpoints(issuer: string, major = 1) {
  const base = `${issuer}/svc/v${major}`;
  return {
    nonce: `${base}/nonce`,
    register: `${base}/register`,
    token: `${base}/token`,
    revoke: `${base}/revoke`,
    jwks: `${base}/jwks`,
    par: `${base}/par`,
    authorize: `${base}/authorize`,
    redirection: `${base}/redirect`,
    openidProviders: `${base}/openid-providers`,
  };
}
