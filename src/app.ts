import crypto from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from './context';
import { fhirRouter } from './fhir';
import { guardRouter, API_VERSION } from './guard';
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
    ctx.logger.error({ err, requestId: correlationId, url: req.originalUrl }, 'unhandled error');
    if (res.headersSent) return;
    res.status(500).json({ error: 'server_error', error_description: `unexpected error, correlation id ${correlationId}` });
  });
  app.use((_req, res) => {
    res.status(404).json({ error: 'resource_not_found', error_description: 'no such endpoint' });
  });
  return app;
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
