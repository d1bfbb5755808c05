import { type Config, fhirBaseUrl } from '../../config';
import type { RateLimitRule } from '../state/rate-limit';

/** Every knob of the enforcement point with its one default and the reason for it. */
export interface PepSettings {
  /** `iss` of access tokens: our own authorization server. */
  issuer: string;
  /** `aud` the access token must name: `$PUBLIC_URL/fhir`. */
  resource: string;
  /** Externally visible origin: `htu` is compared with it plus the request path, never with Host. */
  publicUrl: string;
  /** Clock skew tolerated on `exp`, `nbf`, `iat` of tokens and proofs (ngx-pep pep_leeway 60 s). */
  leewaySec: number;
  /** A proof is accepted this long after its `iat` (ngx-pep pep_dpop_validity 300 s). */
  dpopValiditySec: number;
  /** Verified access tokens kept in memory (one signature check per request: the proof's). */
  tokenCacheSize: number;
  /** Imported JWKS keys are re-read from the store after this. */
  keyCacheSec: number;
  rateLimit: RateLimitRule;
  /** Byte caps of the forwarded headers. */
  headerCaps: { userInfo: number; clientData: number; poppContent: number };
  popp: {
    jwksUrl?: string;
    requiredRoutes: string[];
    /** `quarter`: the proof must stem from the current calendar quarter (ngx-pep default); else seconds. */
    validity: 'quarter' | number;
    /** A proof from the previous quarter is still accepted this long into a new one (A_26477-01). */
    quarterGraceSec: number;
    /** JWKS refetched this often (ZETA UC22: 5 min). */
    jwksRefreshSec: number;
    /** A cached JWKS stays usable this long after the last successful fetch when the issuer fails (UC17/UC22: 24 h). */
    jwksStaleSec: number;
    /** HTTP timeout of a JWKS fetch (ngx-pep pep_http_client_timeout is 10 s; the request waits, so shorter). */
    jwksTimeoutMs: number;
  };
  /** The upstream FHIR base in proxy mode (UPSTREAM_URL). */
  upstreamUrl?: string;
  /** Upstream request timeout in proxy mode. */
  upstreamTimeoutMs: number;
}

export function pepSettings(config: Config, overrides: Partial<PepSettings> = {}): PepSettings {
  return {
    issuer: config.publicUrl,
    resource: fhirBaseUrl(config),
    publicUrl: config.publicUrl,
    leewaySec: 60,
    dpopValiditySec: 300,
    tokenCacheSize: 10_000,
    keyCacheSec: 300,
    rateLimit: { limit: config.rateLimitFhirPerClient, windowSec: 60 },
    headerCaps: { userInfo: 250, clientData: 250, poppContent: 450 },
    popp: {
      jwksUrl: config.poppJwksUrl,
      requiredRoutes: config.poppRequiredRoutes,
      validity: 'quarter',
      quarterGraceSec: 300,
      jwksRefreshSec: 300,
      jwksStaleSec: 86_400,
      jwksTimeoutMs: 3_000,
    },
    upstreamUrl: config.upstreamUrl,
    upstreamTimeoutMs: 30_000,
    ...overrides,
  };
}
