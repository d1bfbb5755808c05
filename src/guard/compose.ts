import type { AppContext } from '../context';
import type { SecurityAudit } from '../server-lib/audit-port';
import { attestationMethods, type AttestationMethod } from './attestation';
import { ActiveClients } from './authserver/clients/client-store';
import { UpstreamIdps } from './authserver/code-flow/upstream-idps';
import type { GuardDeps } from './authserver/deps';
import { newestStableMajor } from './authserver/discovery';
import { tokenGrants, type Grant } from './authserver/grants';
import { RefreshFamilies } from './authserver/tokens/refresh-tokens';
import { AccessTokenVerifier } from './authserver/tokens/verify-access-token';
import { WorkloadIssuers } from './authserver/workload/workload-issuers';
import { Es256KeyCache } from './jose/es256';
import { SigningKeys } from './keys/signing-keys';
import { pepSettings } from './pep/settings';
import { cardIssuersFor, type CardIssuers } from './pki/card-issuers';
import { OcspChecker } from './pki/ocsp';
import { createPolicyEngine, loadPolicyData, type PolicyEngine } from './policy';
import { endpoints, guardSettings, type GuardSettings } from './settings';
import { RevokedSessions } from './state/revoked-sessions';
import { sharedState, type SharedState } from './state/shared-state';
import type { ApiVersion } from './versions';

// The guard's composition: its settings, stores, keys and engines, built once per application;
// the routes that use them are in router.ts.

/** Exact SemVer of the guard API served by this instance. */
export const API_VERSION = '1.0.0';

/** Majors this instance knows; a deprecated one gets a Warning header, a shut-down one 410. */
export const API_VERSIONS: ApiVersion[] = [{ major: 1, version: API_VERSION, status: 'stable' }];

export interface GuardOptions {
  settings?: Partial<GuardSettings>;
  policyEngine?: PolicyEngine;
  versions?: ApiVersion[];
  /** Attestation methods beside the built-in ones (guard/attestation/index.ts). */
  attestationMethods?: readonly AttestationMethod[];
  /** Grants beside the built-in ones (guard/authserver/grants/index.ts). */
  grants?: readonly Grant[];
  /** The application's shared guard state (app.ts chooses it once); by default one of its own. */
  state?: SharedState;
  /** The application's session liveness, shared with its enforcement point; by default one of its own. */
  sessions?: RevokedSessions;
  /** The application's card issuers (app.ts reports their state in /readyz); by default its own. */
  cardIssuers?: CardIssuers;
  /** The audit trail, told of the authorization server's security events. */
  audit?: SecurityAudit;
  /** Takes the guard's start-up work (`warmUpGuard`), for the server to await before it listens. */
  warmUp?: (work: () => Promise<void>) => void;
}

/** Builds the AS's dependencies once per app. */
export function composeGuard(ctx: AppContext, options: GuardOptions = {}): GuardDeps {
  const settings = guardSettings(ctx.config, options.settings);
  const policyData = loadPolicyData(ctx.config.policyFile);
  // At start: a bad CARD_TRUST_ANCHORS stops the process, and the dev-PKI warning is logged once.
  const cardIssuers = options.cardIssuers ?? cardIssuersFor(ctx);
  const keys = new SigningKeys(ctx, settings);
  const sessions = options.sessions ?? new RevokedSessions(ctx.db);
  const state = options.state ?? sharedState(ctx);
  return {
    ctx,
    settings,
    workloadIssuers: new WorkloadIssuers(ctx.config.workloadIssuers, ctx.now),
    idps: new UpstreamIdps(ctx.config.oidcProviders, ctx.now),
    // Discovery advertises the newest stable major; requests under another major get its URLs (depsPerMajor).
    urls: endpoints(settings.issuer, newestStableMajor(options.versions ?? API_VERSIONS)),
    keys,
    policyData,
    policy: options.policyEngine ?? createPolicyEngine(ctx.config, policyData, settings.policyTimeoutMs),
    cardIssuers,
    // OCSP answers are cached until nextUpdate and never longer than a refresh token lives.
    ocsp: new OcspChecker(ctx.config.cardOcsp, settings.refreshTokenTtlSec, ctx.logger, ctx.now),
    attestation: attestationMethods(ctx, { state, extra: options.attestationMethods }),
    grants: tokenGrants(options.grants),
    state,
    sessions,
    accessTokens: new AccessTokenVerifier(keys, pepSettings(ctx.config), ctx.now, sessions),
    es256Keys: new Es256KeyCache(),
    clients: new ActiveClients(),
    families: new RefreshFamilies(),
  };
}

/**
 * The deps of a request under /svc/v{major}: `htu` of DPoP proofs, `aud` of client assertions and
 * subject tokens name the endpoint the client called, in the major it chose.
 */
export function depsPerMajor(deps: GuardDeps, versions: ApiVersion[]): (major: number | undefined) => GuardDeps {
  const byMajor = new Map<number, GuardDeps>(versions.map((v) => [v.major, { ...deps, urls: endpoints(deps.settings.issuer, v.major) }]));
  return (major) => (major === undefined ? undefined : byMajor.get(major)) ?? deps;
}
