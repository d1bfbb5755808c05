import express, { Router, type Request, type Response } from 'express';
import type { AppContext } from '../context';
import { authorizationServerMetadata, openidConfiguration, protectedResourceMetadata } from './authserver/discovery';
import type { GuardDeps } from './authserver/deps';
import { registerClient, resendRegistrationCode, verifyRegistration } from './authserver/registration/register-client';
import { revokeEndpoint } from './authserver/revoke';
import { tokenEndpoint, type EndpointRequest } from './authserver/token-endpoint';
import { authorize, pushAuthorizationRequest, redirection } from './authserver/code-flow/code-flow';
import { API_VERSIONS, composeGuard, depsPerMajor, type GuardOptions } from './compose';
import { ERROR_REGISTRY, InvalidRequest, RateLimitExceeded } from './errors';
import { clientIp, guardErrorHandler, handleAsync, sendCachedJson, sendGuardError } from './http/respond';
import { issueNonce } from './state/nonce-store';
import { hitRateLimit, rateLimitHeaders } from './state/rate-limit';
import { warmUpGuard } from './warm-up';
import { partiesOfIssued, SecurityEvents } from './http/security-events';
import type { GuardError } from './errors';
import type { AuditParties, SecurityEventCode } from '../server-lib/audit-port';
import { REFRESH_TOKEN_REUSED } from './authserver/grants/refresh-token';
import { versionEntries, versionGate } from './versions';

// The guard's routes: discovery and the authorization server under /svc/v{major}, each endpoint
// with its per-IP bucket; what they run with is built in compose.ts.

/** Discovery documents and the authorization server under /svc/v{major}. */
export function guardRouter(ctx: AppContext, options: GuardOptions = {}): Router {
  const versions = options.versions ?? API_VERSIONS;
  const deps = composeGuard(ctx, { ...options, versions });
  options.warmUp?.(() => warmUpGuard(deps));
  const { settings } = deps;
  const perMajor = depsPerMajor(deps, versions);
  // versionGate puts the major the request chose in res.locals.apiMajor.
  const forMajor = (res: Response) => perMajor(res.locals.apiMajor as number | undefined);
  const asMetadata = authorizationServerMetadata(deps, versions);
  const prMetadata = protectedResourceMetadata(settings, deps.urls, deps.policyData, versions);
  const router = Router();
  const limited = (name: string) => rateLimitPerIp(deps, name);
  const events = new SecurityEvents(options.audit);

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
    events.handler(registrationRefusal, async (req, res) => {
      if (!req.is('application/json')) throw new InvalidRequest('the request must be application/json');
      const outcome = await registerClient(deps, req.body);
      // 201: registered; 202: an e-mail code or a challenge is pending (recorded when it is verified).
      if (outcome.status === 201) await events.record(req, res, 'client-registered', registeredParties(outcome.body));
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
    events.handler(
      (err) => (err.status === 429 || err.status >= 500 ? undefined : 'email-code-failed'),
      async (req, res) => {
        if (!req.is('application/json')) throw new InvalidRequest('the request must be application/json');
        const record = await verifyRegistration(ctx, req.body);
        await events.record(req, res, 'client-registered', registeredParties(record));
        res.setHeader('Cache-Control', 'no-store');
        res.status(201).json(record);
      },
    ),
  );
  v.post(
    '/token',
    express.text({ limit: '64kb', type: () => true }),
    events.handler(tokenRefusal, async (req, res) => {
      const tokens = await tokenEndpoint(forMajor(res), endpointRequest(req));
      await events.record(req, res, 'token-issued', partiesOfIssued(tokens.access_token));
      res.setHeader('Cache-Control', 'no-store');
      res.json(tokens);
    }),
  );
  v.post(
    '/revoke',
    express.text({ limit: '64kb', type: () => true }),
    events.handler(
      () => undefined,
      async (req, res) => {
        await revokeEndpoint(forMajor(res), endpointRequest(req));
        await events.record(req, res, 'token-revoked');
        res.setHeader('Cache-Control', 'no-store');
        res.status(200).end();
      },
    ),
  );
  v.all(['/nonce', '/register', '/register/verify', '/register/resend', '/token', '/revoke', '/jwks', '/authorize', '/par', '/redirect', '/openid-providers'], (_req, res) => {
    res.setHeader('Allow', ['/nonce', '/jwks', '/authorize', '/redirect', '/openid-providers'].includes(_req.path) ? 'GET' : 'POST');
    sendGuardError(res, settings.issuer, new InvalidRequest('method not allowed', { status: 405 }));
  });
  router.use(guardErrorHandler(settings.issuer));
  return router;
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

/** A refused registration: an attestation that did not verify, or another reason. */
function registrationRefusal(err: GuardError): SecurityEventCode | undefined {
  if (err.status === 429 || err.status >= 500) return undefined;
  return /attest|platform_[ab]|tpm|quote|certificate|credential|posture/i.test(err.description) ? 'attestation-failed' : 'registration-refused';
}

/** A refused token request; a reused refresh token (the family revoked) is its own event. */
function tokenRefusal(err: GuardError): SecurityEventCode | undefined {
  if (err.status >= 500 || err.code === 'use_dpop_nonce') return undefined;
  return err.description === REFRESH_TOKEN_REUSED ? 'refresh-token-reuse' : 'token-refused';
}

/** The client a registration answer names. */
function registeredParties(body: unknown): AuditParties {
  const b = body as { client_id?: unknown; software_id?: unknown; software_version?: unknown } | undefined;
  return typeof b?.client_id === 'string'
    ? { client: { clientId: b.client_id, product: typeof b.software_id === 'string' ? b.software_id : undefined, version: typeof b.software_version === 'string' ? b.software_version : undefined } }
    : {};
}
