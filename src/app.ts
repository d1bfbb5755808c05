import crypto from 'node:crypto';
import cors from 'cors';
import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { bookingInterceptors, SlotRetention } from './booking';
import type { AppContext } from './context';
import { fhirBodyText, fhirEnv, fhirReachPort, fhirRouter, route, type FhirEnv, type Operation } from './fhir';
import { pathSegments } from './model';
import { bookings, httpDuration, httpRequests } from './server-lib/metrics';
import {
  API_VERSION,
  cardIssuersFor,
  enforcementPoint,
  guardRouter,
  aslRequired,
  aslRoutes,
  auditSigner,
  keyEncryptionFor,
  pepSettings,
  policyEngineReady,
  ResourceNotFound,
  RevokedSessions,
  sendGuardError,
  ServerError,
  sharedState,
  SharedStateUnavailable,
  TemporarilyUnavailable,
  upstreamProxy,
  type AttestationMethod,
  type Grant,
  type GuardOptions,
} from './guard';
import { Jobs } from './jobs';
import { AuditTrail } from './audit';
import { StoreBusy, StoreUnavailable, type WriteInterceptor } from './store';
import { subscriptionInterceptors, Subscriptions, type DispatcherSettings } from './subscriptions';
import { withTimeout } from './server-lib/timeout';
import { RETRY_AFTER_SECONDS } from './common/retry-after';

/** The parts of one application, composed here and nowhere else; two in one process share nothing. */
export interface Parts {
  ctx: AppContext;
  /** The FHIR layer: its repository runs every part's write interceptors. */
  fhir: FhirEnv;
  jobs: Jobs;
  subscriptions: Subscriptions;
  /** The audit trail: every access as an AuditEvent (src/audit/). */
  audit: AuditTrail;
  /** The background work of a replica: the job queue and the subscription delivery loop. */
  start(delivery?: Partial<DispatcherSettings>): Promise<void>;
  /** Stops the background work (the owner of `ctx` closes the store). */
  stop(): Promise<void>;
}

/** The parts and the HTTP application on them. */
export interface Terminus extends Parts {
  app: Express;
  /** Start-up work of the routes (the guard's signing key, its certificate library): done before the server listens. */
  warmUp(): Promise<void>;
}

/**
 * What a deployment (or a test) adds to the built-in parts, one list per extension point
 * (docs/architecture.md, "Where to add").
 */
export interface Extensions {
  /** Write interceptors run after the built-in ones (a deployment's own rules; tests that simulate a crash mid-write). */
  interceptors?: readonly WriteInterceptor[];
  /** FHIR operations beside the built-in ones (fhir/operations/index.ts). */
  operations?: readonly Operation[];
  /** Attestation methods beside the built-in ones (guard/attestation/index.ts). */
  attestationMethods?: readonly AttestationMethod[];
  /** Grants beside the built-in ones (guard/authserver/grants/index.ts). */
  grants?: readonly Grant[];
}

/**
 * The composition root. Write interceptors in the order they run: booking first (it may refuse a
 * write or cascade), then subscriptions (its rules, then the wake-up of the delivery loop), then
 * any the caller adds.
 */
export function composeParts(ctx: AppContext, options: Extensions = {}): Parts {
  const jobs = new Jobs(ctx);
  const kek = keyEncryptionFor(ctx);
  let subscriptions: Subscriptions | undefined;
  // The audit trail observes every write last, once the rules before it have let the write through.
  const audit = new AuditTrail(ctx, auditSigner(ctx));
  const interceptors = [...bookingInterceptors(), ...subscriptionInterceptors(ctx, kek, () => subscriptions?.nudge()), ...(options.interceptors ?? []), audit.writeObserver()];
  const fhir = fhirEnv(ctx, { interceptors, jobs, operations: options.operations, audit });
  subscriptions = new Subscriptions(ctx, fhir.repo, kek);
  const delivery = subscriptions;
  const retention = new SlotRetention(ctx, fhir.repo);
  return {
    ctx,
    fhir,
    jobs,
    subscriptions,
    audit,
    async start(settings) {
      await audit.start();
      await jobs.start();
      delivery.start(settings);
      retention.start();
    },
    async stop() {
      await retention.stop();
      await delivery.stop();
      await jobs.stop();
      // Last: the checkpoint at shutdown covers everything the replica recorded.
      await audit.stop();
    },
  };
}

/** The whole application: the parts, the guard and the HTTP routes. */
export function composeTerminus(ctx: AppContext, options: Extensions = {}): Terminus {
  const parts = composeParts(ctx, options);
  void parts.audit.prepare();
  const warmUps: (() => Promise<void>)[] = [() => parts.audit.prepare()];
  const app = createExpressApp(ctx, parts.fhir, { attestationMethods: options.attestationMethods, grants: options.grants, warmUp: (work) => warmUps.push(work), audit: parts.audit });
  return {
    ...parts,
    app,
    async warmUp() {
      for (const work of warmUps) await work();
    },
  };
}

/** The HTTP application alone, for callers that start no background work (tests, tools). */
export function createApp(ctx: AppContext): Express {
  return composeTerminus(ctx).app;
}

function createExpressApp(ctx: AppContext, fhir: FhirEnv, guard: Pick<GuardOptions, 'attestationMethods' | 'grants' | 'warmUp'> & { audit: AuditTrail }): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', ctx.config.trustProxy);
  app.set('query parser', 'extended');
  app.use(requestContext(ctx));
  app.use(httpMetrics(fhir));
  if (ctx.config.corsOrigins.length) app.use(corsPolicy(ctx.config.corsOrigins));
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready: the store, Redis (when configured) and the policy engine answer (docs/requirements.md, Practice page and operations); each names its state.
  const cardIssuers = cardIssuersFor(ctx);
  app.get('/readyz', async (_req, res) => {
    const checks = {
      store: await probe(() => ctx.db.query('SELECT 1')),
      // Read replicas (DATABASE_READ_URL): one lagging or gone is degraded, the primary serves its reads.
      read_replicas: ctx.db.reads ? ctx.db.reads.state() : 'not used',
      redis: ctx.redis ? await probe(() => ctx.redis!.ping()) : 'not used',
      policy_engine: (await policyEngineReady(ctx.config, READY_TIMEOUT_MS)) ? 'ok' : 'unavailable',
      card_tsl: cardIssuers.readiness(),
      audit: await guard.audit.readiness(),
    };
    const states = Object.values(checks).map((v) => (typeof v === 'string' ? v : v.status));
    const ready = states.every((v) => v !== 'unavailable');
    // Degraded (a trust list past its refresh) still serves: the last good list is in force.
    res.status(ready ? 200 : 503).json({ status: !ready ? 'unavailable' : states.includes('degraded') ? 'degraded' : 'ready', checks });
  });
  // One shared-state adapter for the authorization server and the enforcement point.
  const state = sharedState(ctx);
  const sessions = new RevokedSessions(ctx.db);
  app.use(guardRouter(ctx, { ...guard, state, sessions, cardIssuers }));
  // The additional security layer (ASL); its inner requests run through this very app.
  app.use(aslRoutes(ctx, { state, app: () => app }));
  // The enforcement point, then the protected application (embedded, or UPSTREAM_URL in proxy mode).
  app.use('/fhir', aslRequired(ctx), enforcementPoint(ctx, { state, sessions, fhir: fhirReachPort(fhir), readBody: fhirBodyText(), audit: guard.audit }), ctx.config.upstreamUrl ? upstreamProxy(ctx, pepSettings(ctx.config)) : fhirRouter(ctx, fhir));
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const correlationId = res.locals.requestId as string;
    if (redisUnavailable(ctx, err)) {
      ctx.logger.warn({ requestId: correlationId, url: req.originalUrl }, 'request failed: redis unavailable');
      if (!res.headersSent) sendGuardError(res, ctx.config.publicUrl, new TemporarilyUnavailable('shared guard state (Redis) is unavailable; retry later'));
      return;
    }
    if (err instanceof StoreBusy) {
      ctx.logger.warn({ requestId: correlationId, url: req.originalUrl, err: err.message }, 'request refused: the server is busy (database pool)');
      if (!res.headersSent) sendGuardError(res, ctx.config.publicUrl, new TemporarilyUnavailable(`the server is busy: ${err.message}; retry later`, { headers: { 'Retry-After': RETRY_AFTER_SECONDS.storeBusy } }));
      return;
    }
    if (err instanceof StoreUnavailable) {
      ctx.logger.warn({ requestId: correlationId, url: req.originalUrl, err: err.message }, 'request failed: database unavailable');
      if (!res.headersSent) sendGuardError(res, ctx.config.publicUrl, new TemporarilyUnavailable('the database is unavailable; retry later', { headers: { 'Retry-After': RETRY_AFTER_SECONDS.storeUnavailable } }));
      return;
    }
    ctx.logger.error({ err, requestId: correlationId, url: req.originalUrl }, 'unhandled error');
    if (res.headersSent) return;
    sendGuardError(res, ctx.config.publicUrl, new ServerError(`unexpected error, correlation id ${correlationId}`));
  });
  app.use((_req, res) => {
    sendGuardError(res, ctx.config.publicUrl, new ResourceNotFound('no such endpoint'));
  });
  return app;
}

/**
 * The shared Redis connection fails fast while Redis is away (server.ts connectRedis): such a
 * failure (the guard's shared state says so with its own error; anything else while the
 * connection is down) is the service being temporarily unavailable, not a bug.
 */
function redisUnavailable(ctx: AppContext, err: unknown): boolean {
  return err instanceof SharedStateUnavailable || (ctx.redis !== undefined && ctx.redis.status !== 'ready');
}

/** Request id, the SVC-API-Version header on every response, and one access-log line. */
function requestContext(ctx: AppContext) {
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.header('x-request-id');
    const requestId = incoming && /^[\w.-]{1,64}$/.test(incoming) ? incoming : crypto.randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('SVC-API-Version', API_VERSION);
    const started = process.hrtime.bigint();
    // Read now: mounted routers strip their prefix from req.url while they handle the request.
    const path = req.path;
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // The path only: query strings may carry identifiers (no identities in clear).
      ctx.logger.info(
        { requestId, method: req.method, path, status: res.statusCode, ms: Math.round(ms * 10) / 10, client: res.locals.clientHash },
        'request',
      );
    });
    next();
  };
}

/**
 * CORS for the browser apps of CORS_ORIGINS: preflights answered before the guard (they carry no
 * credentials); the DPoP and Authorization headers may be sent, and the headers a client needs
 * (API version, locations, ETag, DPoP nonce, challenges, Retry-After) may be read.
 */
function corsPolicy(origins: string[]): RequestHandler {
  return cors({
    origin: origins,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders: ['Authorization', 'DPoP', 'Content-Type', 'Accept', 'Prefer', 'If-Match', 'If-None-Match', 'If-None-Exist', 'PoPP', 'X-Request-Id'],
    exposedHeaders: ['SVC-API-Version', 'Location', 'Content-Location', 'ETag', 'Last-Modified', 'DPoP-Nonce', 'WWW-Authenticate', 'Retry-After', 'X-Request-Id', 'X-Rate-Limit-Limit', 'X-Rate-Limit-Remaining', 'X-Rate-Limit-Reset'],
    maxAge: 600,
  });
}

/** Request count and latency per route template and status; `$book` outcomes besides. */
function httpMetrics(fhir: FhirEnv): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const status = res.statusCode;
      const route = routeLabel(fhir, req, status);
      const labels = { method: req.method, route, status: String(status) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
      if (route === '/fhir Appointment $book') bookings.inc({ outcome: bookingOutcome(status, req.header('prefer')) });
    });
    next();
  };
}

/**
 * A label from a small fixed set: FHIR requests by interaction, stored type and known operation;
 * other routes by path with id-like segments folded; anything unmatched as one label.
 */
function routeLabel(fhir: FhirEnv, req: Request, status: number): string {
  const path = req.originalUrl.split('?')[0];
  if (path === '/fhir' || path.startsWith('/fhir/')) {
    try {
      const r = route({ method: req.method, path: pathSegments(path.slice('/fhir'.length)), query: [], headers: {} });
      const what = r.interaction === 'operation' ? (fhir.operations.find(r.operation!, r.type) ? `$${r.operation}` : '$unknown') : r.interaction;
      return ['/fhir', r.type, what].filter(Boolean).join(' ');
    } catch {
      return '/fhir unroutable';
    }
  }
  if (status === 404) return 'unmatched';
  return path.replace(/\/[A-Za-z0-9_-]{16,}(?=\/|$)/g, '/:id');
}

function bookingOutcome(status: number, prefer: string | undefined): string {
  if (status === 201) return 'booked';
  if (status === 202) return /respond-async/i.test(prefer ?? '') ? 'accepted-async' : 'pending';
  if (status === 409) return 'conflict';
  if (status >= 500) return 'error';
  return 'refused';
}

/** A readiness probe answers within this, dependency or not. */
const READY_TIMEOUT_MS = 2000;

async function probe(check: () => Promise<unknown>): Promise<'ok' | 'unavailable'> {
  try {
    await withTimeout(check(), READY_TIMEOUT_MS, 'timeout');
    return 'ok';
  } catch {
    return 'unavailable';
  }
}
