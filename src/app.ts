import crypto from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from './context';
import { fhirRouter } from './fhir';
import { guardRouter, API_VERSION } from './guard';
import { errorUri } from './guard/http/respond';
import { enforcementPoint, pepSettings, upstreamProxy } from './guard/pep';

/** Composes the parts; no logic of its own. */
export function createApp(ctx: AppContext): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', ctx.config.trustProxy);
  app.set('query parser', 'extended');
  app.use(requestContext(ctx));
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    try {
      await ctx.db.query('SELECT 1');
      if (ctx.redis) await ctx.redis.ping();
      res.json({ status: 'ready' });
    } catch {
      res.status(503).json({ status: 'unavailable' });
    }
  });
  app.use(guardRouter(ctx));
  // Issue 6: the enforcement point, then the protected application (embedded, or UPSTREAM_URL in proxy mode).
  app.use('/fhir', enforcementPoint(ctx), ctx.config.upstreamUrl ? upstreamProxy(ctx, pepSettings(ctx.config)) : fhirRouter(ctx));
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const correlationId = res.locals.requestId as string;
    if (redisUnavailable(ctx, err)) {
      ctx.logger.warn({ requestId: correlationId, url: req.originalUrl }, 'request failed: redis unavailable');
      if (!res.headersSent) sendError(ctx, res, 503, 'temporarily_unavailable', 'shared guard state (Redis) is unavailable; retry later');
      return;
    }
    ctx.logger.error({ err, requestId: correlationId, url: req.originalUrl }, 'unhandled error');
    if (res.headersSent) return;
    sendError(ctx, res, 500, 'server_error', `unexpected error, correlation id ${correlationId}`);
  });
  app.use((_req, res) => {
    sendError(ctx, res, 404, 'resource_not_found', 'no such endpoint');
  });
  return app;
}

/** The guard's error object (seed 000 section 2.9), also for what no router claimed. */
function sendError(ctx: AppContext, res: Response, status: number, error: string, description: string): void {
  res.setHeader('Cache-Control', 'no-store');
  res.status(status).json({ error, error_description: description, error_uri: errorUri(ctx.config.publicUrl, error) });
}

/**
 * The shared Redis connection fails fast while Redis is away (server.ts connectRedis): such a
 * failure is the service being temporarily unavailable, not a bug.
 */
function redisUnavailable(ctx: AppContext, err: unknown): boolean {
  if (!ctx.redis) return false;
  if (ctx.redis.status !== 'ready') return true;
  const message = err instanceof Error ? err.message : '';
  return /Command timed out|Connection is closed|enableOfflineQueue|MaxRetriesPerRequest|max retries per request/i.test(message) || (err as Error)?.name === 'MaxRetriesPerRequestError';
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
      // The path only: query strings may carry identifiers (CONTRACT: no identities in clear).
      ctx.logger.info(
        { requestId, method: req.method, path, status: res.statusCode, ms: Math.round(ms * 10) / 10, client: res.locals.clientHash },
        'request',
      );
    });
    next();
  };
}
