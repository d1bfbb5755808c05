import express, { Router, type Request, type Response } from 'express';
import type { AppContext } from '../context';
import { attestationMethods, type AttestationMethod } from './attestation';
import { tokenGrants, type Grant } from './authserver/grants';
import { authorizationServerMetadata, newestStableMajor, openidConfiguration, protectedResourceMetadata } from './authserver/discovery';
import type { GuardDeps } from './authserver/deps';
import { ActiveClients } from './authserver/clients/client-store';
import { RefreshFamilies } from './authserver/tokens/refresh-tokens';
import { Es256KeyCache } from './jose/es256';
import { registerClient, resendRegistrationCode, verifyRegistration } from './authserver/registration/register-client';
import { revokeEndpoint } from './authserver/revoke';
import { tokenEndpoint, type EndpointRequest } from './authserver/token-endpoint';
import { ERROR_REGISTRY, InvalidRequest, RateLimitExceeded } from './errors';
import { clientIp, guardErrorHandler, handleAsync, sendCachedJson, sendGuardError } from './http/respond';
import { SigningKeys } from './keys/signing-keys';
import { loadCardTrustAnchors } from './pki/card-trust';
import { warmUpGuard } from './warm-up';
import { OcspChecker } from './pki/ocsp';
import { createPolicyEngine, loadPolicyData, type PolicyEngine } from './policy';
import { endpoints, guardSettings, type GuardSettings } from './settings';
import { issueNonce } from './state/nonce-store';
import { hitRateLimit, rateLimitHeaders } from './state/rate-limit';
import { sharedState, type SharedState } from './state/shared-state';
import { RevokedSessions } from './state/revoked-sessions';
import { AccessTokenVerifier } from './authserver/tokens/verify-access-token';
import { WorkloadIssuers } from './authserver/workload/workload-issuers';
import { UpstreamIdps } from './authserver/code-flow/upstream-idps';
import { authorize, pushAuthorizationRequest, redirection } from './authserver/code-flow/code-flow';
import { pepSettings } from './pep/settings';
import { versionEntries, versionGate, type ApiVersion } from './versions';


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
  /** Takes the guard's start-up work (`warmUpGuard`), for the server to await before it listens. */
  warmUp?: (work: () => Promise<void>) => void;
}

/** Discovery documents and the authorization server under /svc/v{major}. */
export function guardRouter(ctx: AppContext, options: GuardOptions = {}): Router {
  const versions = options.versions ?? API_VERSIONS;
  const deps = composeGuard(ctx, { ...options, versions });
  options.warmUp?.(() => warmUpGuard(deps));
  const { settings } = deps;
  const forMajor = depsPerMajor(deps, versions);
  const asMetadata = authorizationServerMetadata(deps, versions);
  const prMetadata = protectedResourceMetadata(settings, deps.urls, deps.policyData, versions);
  const router = Router();
  const limited = (name: string) => rateLimitPerIp(deps, name);

  router.get('/.well-known/oauth-authorization-server', limited('discovery'), (req, res) => {
    sendCachedJson(req, res, asMetadata, settings.discoveryMaxAgeSec);
  });
  const oidcMetadata = openidConfiguration(settings, deps.urls, versions);
  router.get('/.well-known/openid-configuration', limited('discovery'), (req, res) => {
    sendCachedJson(req, res, oidcMetadata, settings.discoveryMaxAgeSec);
  });
  router.get(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/fhir'], limited('discovery'), (req, res) => {
    sendCachedJson(req, res, prMetadata, settings.discoveryMaxAgeSec);
  });

  const v = Router({ mergeParams: true });
  // The per-IP limit comes first: 404 (unknown major), 410 (shut down) and 405 carry x-rate-limit-* too.
  router.use('/svc/v:major', rateLimitPerIp(deps, (req) => ENDPOINT_BUCKETS[req.path.replace(/\/+$/, '')] ?? 'svc'), versionGate(versions), v);
  // Authorization code with PAR and PKCE for patient apps
  // (docs/requirements.md#patients-authorization-code-flow).
  v.post(
    '/par',
    express.text({ limit: '64kb', type: () => true }),
    handleAsync(async (req, res) => {
      const pushed = await pushAuthorizationRequest(forMajor(res), endpointRequest(req));
      res.setHeader('Cache-Control', 'no-store');
      res.status(201).json(pushed);
    }),
  );
  v.get(
    '/authorize',
    handleAsync(async (req, res) => {
      const to = await authorize(forMajor(res), queryOf(req));
      res.setHeader('Cache-Control', 'no-store');
      res.redirect(302, to.location);
    }),
  );
  v.get(
    '/redirect',
    handleAsync(async (req, res) => {
      const to = await redirection(forMajor(res), queryOf(req));
      res.setHeader('Cache-Control', 'no-store');
      res.redirect(302, to.location);
    }),
  );
  v.get('/openid-providers', (req, res) => {
    sendCachedJson(req, res, deps.idps.list(), settings.discoveryMaxAgeSec);
  });
  v.get('/', (_req, res) => {
    res.json({ api_versions_supported: versionEntries(versions, settings.issuer), ...deps.urls });
  });
  v.get('/errors', (req, res) => {
    sendCachedJson(req, res, { errors: ERROR_REGISTRY }, settings.discoveryMaxAgeSec);
  });
  v.get(
    '/jwks',
    handleAsync(async (req, res) => sendCachedJson(req, res, await deps.keys.jwks(), settings.jwksMaxAgeSec)),
  );
  v.get(
    '/nonce',
    handleAsync(async (_req, res) => {
      const n = await issueNonce(deps.state, ctx.now(), settings.nonceTtlSec);
      res.setHeader('Cache-Control', 'no-store');
      res.json({ nonce: n.nonce, expires_in: n.expiresIn });
    }),
  );
  v.post(
    '/register',
    express.json({ limit: '64kb', type: () => true, strict: false }),
    handleAsync(async (req, res) => {
      if (!req.is('application/json')) throw new InvalidRequest('the request must be application/json');
      const outcome = await registerClient(deps, req.body);
      res.setHeader('Cache-Control', 'no-store');
      res.status(outcome.status).json(outcome.body);
    }),
  );
  v.post(
    '/register/resend',
    express.json({ limit: '4kb', type: () => true, strict: false }),
    handleAsync(async (req, res) => {
      if (!req.is('application/json')) throw new InvalidRequest('the request must be application/json');
      const pending = await resendRegistrationCode(ctx, req.body, deps.state);
      res.setHeader('Cache-Control', 'no-store');
      res.status(202).json(pending);
    }),
  );
  v.post(
    '/register/verify',
    express.json({ limit: '16kb', type: () => true, strict: false }),
    handleAsync(async (req, res) => {
      if (!req.is('application/json')) throw new InvalidRequest('the request must be application/json');
      const record = await verifyRegistration(ctx, req.body);
      res.setHeader('Cache-Control', 'no-store');
      res.status(201).json(record);
    }),
  );
  v.post(
    '/token',
    express.text({ limit: '64kb', type: () => true }),
    handleAsync(async (req, res) => {
      const tokens = await tokenEndpoint(forMajor(res), endpointRequest(req));
      res.setHeader('Cache-Control', 'no-store');
      res.json(tokens);
    }),
  );
  v.post(
    '/revoke',
    express.text({ limit: '64kb', type: () => true }),
    handleAsync(async (req, res) => {
      await revokeEndpoint(forMajor(res), endpointRequest(req));
      res.setHeader('Cache-Control', 'no-store');
      res.status(200).end();
    }),
  );
  v.all(['/nonce', '/register', '/register/verify', '/register/resend', '/token', '/revoke', '/jwks', '/authorize', '/par', '/redirect', '/openid-providers'], (_req, res) => {
    res.setHeader('Allow', ['/nonce', '/jwks', '/authorize', '/redirect', '/openid-providers'].includes(_req.path) ? 'GET' : 'POST');
    sendGuardError(res, settings.issuer, new InvalidRequest('method not allowed', { status: 405 }));
  });
  router.use(guardErrorHandler(settings.issuer));
  return router;
}

/** Builds the AS's dependencies once per app. */
export function composeGuard(ctx: AppContext, options: GuardOptions = {}): GuardDeps {
  const settings = guardSettings(ctx.config, options.settings);
  const policyData = loadPolicyData(ctx.config.policyFile);
  // At start: a bad CARD_TRUST_ANCHORS stops the process, and the dev-PKI warning is logged once.
  const anchors = loadCardTrustAnchors(ctx);
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
    anchors: () => anchors,
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

/** Bucket of the per-IP limit for a path under /svc/v{major}; the JWKS shares the discovery bucket. */
const ENDPOINT_BUCKETS: Record<string, string> = {
  '/nonce': 'nonce',
  '/register': 'register',
  '/register/verify': 'register',
  '/register/resend': 'register',
  '/token': 'token',
  '/revoke': 'revoke',
  '/jwks': 'discovery',
  '/openid-providers': 'discovery',
  '/par': 'authorize',
  '/authorize': 'authorize',
  '/redirect': 'authorize',
};

/**
 * The deps of a request under /svc/v{major}: `htu` of DPoP proofs, `aud` of client assertions and
 * subject tokens name the endpoint the client called, in the major it chose.
 */
function depsPerMajor(deps: GuardDeps, versions: ApiVersion[]): (res: Response) => GuardDeps {
  const byMajor = new Map<number, GuardDeps>(versions.map((v) => [v.major, { ...deps, urls: endpoints(deps.settings.issuer, v.major) }]));
  return (res) => byMajor.get(res.locals.apiMajor as number) ?? deps;
}

/** The raw query of a request, as the code flow reads it (repeated parameters stay visible). */
function queryOf(req: Request): URLSearchParams {
  const i = req.originalUrl.indexOf('?');
  return new URLSearchParams(i >= 0 ? req.originalUrl.slice(i + 1) : '');
}

function endpointRequest(req: Request): EndpointRequest {
  return {
    isForm: req.is('application/x-www-form-urlencoded') === 'application/x-www-form-urlencoded',
    body: typeof req.body === 'string' ? req.body : '',
    dpop: req.headersDistinct.dpop,
    authorization: req.headersDistinct.authorization,
    ip: clientIp(req),
  };
}

/**
 * Per-IP, per-endpoint limit with `x-rate-limit-*` on every response; 429
 * `rate_limit_exceeded` with Retry-After.
 */
function rateLimitPerIp(deps: GuardDeps, bucket: string | ((req: Request) => string)) {
  return (req: Request, res: Response, next: (err?: unknown) => void) => {
    const name = typeof bucket === 'string' ? bucket : bucket(req);
    hitRateLimit(deps.state, `${name}:ip:${clientIp(req)}`, deps.settings.rateLimit.perIp, deps.ctx.now()).then((r) => {
      for (const [k, v] of Object.entries(rateLimitHeaders(r))) res.setHeader(k, v);
      if (r.allowed) return next();
      next(new RateLimitExceeded('too many requests from this address'));
    }, (err: unknown) => {
      // Fail open: an unreachable counter store must not take the guard down with it.
      deps.ctx.logger.warn({ err }, 'guard: rate-limit counter unavailable, request admitted');
      next();
    });
  };
}
