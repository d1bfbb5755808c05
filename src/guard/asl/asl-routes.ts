import express, { Router, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type http from 'node:http';
import type { AppContext } from '../../context';
import { AslRequired } from '../errors';
import { clientIp, sendGuardError } from '../http/respond';
import type { SharedState } from '../state/shared-state';
import { AslError } from '../../common/asl/asl-messages';
import { AslServer, CID_PREFIX } from './asl-server';
import { AslServerKeys } from './asl-server-keys';
import { ASL_INNER, InnerHttp } from './inner-http';

const CBOR = 'application/cbor';
const OCTETS = 'application/octet-stream';
/** The connection id header (ZETA's `ZETA-ASL-CID` under this product's prefix). */
export const CID_HEADER = 'SVC-ASL-CID';
/** libasl: the key-tracing header a test client may send; refused in production (103). */
const TRACING_HEADER = 'svc-asl-nonpu-tracing';

/** How discovery names ASL_MODE (`svc_asl_use`). */
export function aslUse(mode: AppContext['config']['aslMode']): 'not_supported' | 'supported' | 'required' {
  return mode === 'off' ? 'not_supported' : mode;
}

/**
 * The ASL endpoints (docs/requirements.md#additional-security-layer-asl):
 * `GET /CertData.<hash>-<cdv>`, `POST /ASL` (M1 → M2 with `SVC-ASL-CID`), `POST /ASL/<uuid>` (M3
 * → M4 as CBOR, data frames as octets). A data frame's plaintext is one whole HTTP/1.1 request to
 * `/fhir`; it runs through `app` itself, the enforcement point and the FHIR layer included, and
 * its whole response goes back encrypted.
 * With ASL_MODE off there are no such endpoints.
 */
export function aslRoutes(ctx: AppContext, o: { state: SharedState; app: () => (req: http.IncomingMessage, res: http.ServerResponse) => void }): Router {
  const router = Router();
  if (ctx.config.aslMode === 'off') return router;
  const keys = new AslServerKeys(ctx);
  const server = new AslServer(ctx, keys, o.state);
  const inner = new InnerHttp((req, res) => {
    // Inside the tunnel the client is the outer request's peer: no forwarding header of its own counts.
    for (const h of Object.keys(req.headers)) if (h === 'forwarded' || h.startsWith('x-forwarded-')) delete req.headers[h];
    o.app()(req, res);
  });
  const body = express.raw({ type: () => true, limit: '1mb' });

  router.get(/^\/CertData\.(.+)$/, async (req, res, next) => {
    try {
      const data = await keys.certData((req.params as Record<string, string>)[0]);
      if (!data) return void res.status(404).end();
      res.type(CBOR).send(data);
    } catch (err) {
      next(err);
    }
  });
  router.all(/^\/CertData\./, (_req, res) => void res.status(405).setHeader('Allow', 'GET').end());

  router.post('/ASL', body, aslHandler(CBOR, async (req, res) => {
    if (!isMedia(req, CBOR)) return void res.status(415).end();
    const { cid, m2 } = await server.handshake(bodyOf(req));
    res.setHeader(CID_HEADER, cid);
    res.type(CBOR).send(m2);
  }));

  router.post('/ASL/:id', body, aslHandler(CBOR, async (req, res) => {
    const cid = `${CID_PREFIX}${(req.params as Record<string, string>).id}`;
    if (isMedia(req, CBOR)) {
      if (!accepts(req, CBOR)) return void notAcceptable(res);
      return void res.type(CBOR).send(await server.finish(cid, bodyOf(req)));
    }
    if (!isMedia(req, OCTETS)) return void res.status(415).end();
    if (!accepts(req, OCTETS)) return void notAcceptable(res, OCTETS);
    const opened = await server.openRequest(cid, bodyOf(req), req.headers[TRACING_HEADER] !== undefined);
    const head = await inner.parse(opened.plaintext);
    if (!head) throw new AslError('badRequest', 'bad request: the plaintext is not one complete HTTP/1.1 request');
    if (!/^\/fhir(\/|\?|$)/.test(head.url)) throw new AslError('badRequest', 'bad request: only requests to /fhir travel through ASL (origin-form targets)');
    const response = await inner.dispatch(opened.plaintext, clientIp(req));
    res.type(OCTETS).send(opened.sealResponse(response));
  }));
  router.all(['/ASL', '/ASL/:id'], (_req, res) => void res.status(405).setHeader('Allow', 'POST').end());
  // A body the parser refuses (over 1 MiB: 413; cut short: 400) is an ASL error object, not a 500.
  router.use((err: { type?: string; status?: number }, req: Request, res: Response, next: NextFunction) => {
    if (!/^\/ASL(\/|$)/.test(req.path) || typeof err?.status !== 'number' || err.status < 400 || err.status >= 500) return next(err);
    res.status(err.status).type(CBOR).send(new AslError('badRequest', `bad request: ${err.type === 'entity.too.large' ? 'the body is larger than 1 MiB' : 'the body cannot be read'}`).body());
  });
  return router;
}

/**
 * ASL_MODE required: a `/fhir` request that did not come through the tunnel is 403 `asl_required`
 * (the capability statement excepted: it is public and names no one).
 */
export function aslRequired(ctx: AppContext): RequestHandler {
  return (req, res, next) => {
    if (ctx.config.aslMode !== 'required' || (req.socket as { [ASL_INNER]?: boolean })[ASL_INNER]) return next();
    if ((req.method === 'GET' || req.method === 'HEAD') && /^\/metadata\/?$/.test(req.path)) return next();
    sendGuardError(res, ctx.config.publicUrl, new AslRequired('this server requires the additional security layer (svc_asl_use: required): send /fhir requests through POST /ASL'));
  };
}

/** Accept, an empty body, then the handler; ASL errors as CBOR error objects, anything else to the app's handler. */
function aslHandler(accept: string, handler: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      if (req.path === '/ASL' && !accepts(req, accept)) return notAcceptable(res);
      if (bodyOf(req).length === 0) throw new AslError('badRequest', 'bad request: empty body');
      await handler(req, res);
    } catch (err) {
      if (err instanceof AslError) return void res.status(err.status).type(CBOR).send(err.body());
      next(err);
    }
  };
}

function bodyOf(req: Request): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}

function isMedia(req: Request, type: string): boolean {
  return (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase() === type;
}

/** libasl's Accept rule: absent is fine; an item (parameters dropped) `*\/*`, `type/*` or the type itself. */
function accepts(req: Request, type: string): boolean {
  const accept = req.headers.accept;
  if (accept === undefined) return true;
  const [major] = type.split('/');
  return accept.split(',').some((item) => {
    const t = item.split(';')[0].trim().toLowerCase();
    return t === '*/*' || t === `${major}/*` || t === type;
  });
}

function notAcceptable(res: Response, type = CBOR): void {
  res.status(406).type('text/plain').send(`Not Acceptable: ${type}`);
}
