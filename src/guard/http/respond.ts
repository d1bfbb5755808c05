import crypto from 'node:crypto';
import { guardDecisions } from '../../server-lib/metrics';
import type { NextFunction, Request, Response } from 'express';
import { GuardError, InvalidRequest, isGuardError } from '../errors';

/** `error_uri` of every guard error: the registry entry of the code. */
function errorUri(issuer: string, code: string): string {
  return `${issuer}/svc/v1/errors#${code}`;
}

export function sendGuardError(res: Response, issuer: string, err: GuardError): void {
  guardDecisions.inc({ decision: 'refused', error: err.code });
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.setHeader('Cache-Control', 'no-store');
  res.status(err.status).json({ error: err.code, error_description: err.description, error_uri: errorUri(issuer, err.code), ...err.extra });
}

/** Express error middleware of the guard routes: wire errors and body-parser failures; anything else is a bug (app's 500). */
export function guardErrorHandler(issuer: string) {
  return (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    if (isGuardError(err)) return sendGuardError(res, issuer, err);
    const type = typeof err === 'object' && err !== null ? (err as { type?: unknown }).type : undefined;
    if (type === 'entity.parse.failed') return sendGuardError(res, issuer, new InvalidRequest('the request body is not valid JSON'));
    if (type === 'entity.too.large') return sendGuardError(res, issuer, new InvalidRequest('the request body is too large', { status: 413 }));
    if (typeof type === 'string' && type.startsWith('encoding.')) return sendGuardError(res, issuer, new InvalidRequest('unsupported body encoding'));
    // Any other client error of the body parsers (unsupported charset, aborted request, ...).
    const status = typeof err === 'object' && err !== null ? (err as { status?: unknown; expose?: unknown }).status : undefined;
    if (typeof status === 'number' && status >= 400 && status < 500) return sendGuardError(res, issuer, new InvalidRequest('the request body cannot be read', { status }));
    next(err);
  };
}

/** Wraps an async handler so a thrown GuardError reaches guardErrorHandler. */
export function handleAsync(fn: (req: Request, res: Response) => Promise<void>) {
  return (req: Request, res: Response, next: NextFunction) => {
    fn(req, res).catch(next);
  };
}

/**
 * The client's address. From a hop trusted by `trust proxy` (TRUST_PROXY) the last `Forwarded:
 * for=` element (RFC 7239, ZETA A_28440) counts; else Express' `req.ip`, which walks
 * X-Forwarded-For back through the trusted hops. An untrusted peer's headers are ignored.
 */
export function clientIp(req: Request): string {
  const remote = req.socket.remoteAddress ?? '';
  const forwarded = req.headers.forwarded;
  if (typeof forwarded === 'string' && peerIsTrusted(req, remote)) {
    const last = forwarded.split(',').pop() ?? '';
    const m = /(?:^|;)\s*for\s*=\s*("?)([^";,]+)\1/i.exec(last);
    if (m) return m[2].replace(/^\[(.*)\](?::\d+)?$/, '$1').replace(/^([\d.]+):\d+$/, '$1');
  }
  return (req.ip ?? remote).replace(/^::ffff:/, '');
}

/** Express compiles `trust proxy` into `trust proxy fn` (address, hop index) => boolean. */
function peerIsTrusted(req: Request, remote: string): boolean {
  const trust = req.app?.get('trust proxy fn') as ((addr: string, i: number) => boolean) | undefined;
  return remote !== '' && typeof trust === 'function' && trust(remote, 0);
}

/**
 * Serves a JSON document with a strong ETag and `Cache-Control: public, max-age` (RFC 9728/8414
 * documents, JWKS); 304 with the same ETag when `If-None-Match` names it.
 */
export function sendCachedJson(req: Request, res: Response, doc: unknown, maxAgeSec: number): void {
  const body = JSON.stringify(doc);
  const etag = `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', `public, max-age=${maxAgeSec}`);
  const inm = req.headers['if-none-match'];
  if (typeof inm === 'string' && inm.split(',').some((t) => t.trim().replace(/^W\//, '') === etag || t.trim() === '*')) {
    res.status(304).end();
    return;
  }
  res.type('application/json').send(body);
}
