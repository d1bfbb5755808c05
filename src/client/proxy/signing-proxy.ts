import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { KonnektorError } from '../card/konnektor/konnektor-error';
import { ClientInputError } from '../input-error';
import { GuardClientError } from '../guard-client';
import { LoggedOut, type ClientSession } from '../session';
import { Unreachable } from '../unreachable';

/** The header that marks an answer the proxy made itself; the server's answers never carry it. */
export const PROXY_ERROR_HEADER = 'terminus-proxy-error';

/** Request headers a FHIR client may send that the server reads; credentials and hop-by-hop ones stay here. */
const FORWARDED_HEADERS = ['accept', 'accept-language', 'content-type', 'prefer', 'if-match', 'if-none-match', 'if-none-exist', 'if-modified-since', 'x-request-id', 'traceparent'];
/** Answer headers that describe one hop (RFC 9110 §7.6.1) or that fetch has already undone. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-encoding', 'content-length', 'upgrade', 'proxy-authenticate', 'trailer', 'te']);
/** A FHIR transaction of a practice system stays far below this; more is a mistake or an attack on this machine. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export interface SigningProxyOptions {
  session: ClientSession;
  /** A unix socket path (created mode 600), or a port on 127.0.0.1 (0: any free one). */
  socket?: string;
  port?: number;
  log?: (line: string) => void;
  /** How often the session is looked at to refresh its token ahead of expiry (default 15 s). */
  keepWarmMs?: number;
}

export interface SigningProxy {
  /** `unix:PATH` or `http://127.0.0.1:PORT`. */
  address: string;
  close(): Promise<void>;
}

/**
 * A local endpoint through which any FHIR client (HAPI, Firely, fhir-kit-client, curl) uses the
 * repository without knowing DPoP: each `/fhir` request goes out signed by the session (token,
 * proof, ASL when the server asks for it; refreshed ahead of expiry), and the server's status,
 * headers and body come back as they are. `GET /api/health` shows the session. Only this machine
 * reaches it: a unix socket of mode 600, or 127.0.0.1.
 */
export async function startSigningProxy(o: SigningProxyOptions): Promise<SigningProxy> {
  const { session } = o;
  const serve = (req: http.IncomingMessage, res: http.ServerResponse) => {
    void handle(session, req, res).catch((err: unknown) => proxyError(res, 500, 'internal', `the proxy failed: ${(err as Error).message}`));
  };
  const server = http.createServer(serve);
  // A client that asks before sending its body (`Expect: 100-continue`, as curl does for large
  // ones) gets the 413 instead of the go-ahead (RFC 9110 §10.1.1) and sends nothing: told to go
  // ahead, it would still be sending when the proxy closes, and the reset that close causes can
  // take the unread 413 with it.
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) {
      tooLarge(res);
      return;
    }
    res.writeContinue();
    serve(req, res);
  });
  let address: string;
  if (o.socket) {
    fs.mkdirSync(path.dirname(o.socket), { recursive: true, mode: 0o700 });
    // A socket left by a proxy that died: a live one answers, so only a dead one is removed.
    if (fs.existsSync(o.socket) && !(await socketAnswers(o.socket))) fs.rmSync(o.socket, { force: true });
    // The socket file is made by bind(2), which server.listen() calls before it returns (not in a
    // cluster worker): a umask that leaves the owner's bits only, set around that call and restored
    // at once, creates it mode 600, so there is no moment in which another local user could
    // connect (a chmod after listen leaves one). In a worker thread process.umask(mask) throws:
    // the proxy then does not start on a socket, rather than start on a looser one.
    const umask = process.umask(0o177);
    let bound: Promise<void>;
    try {
      bound = listen(server, { path: o.socket });
    } finally {
      process.umask(umask);
    }
    await bound;
    address = `unix:${o.socket}`;
  } else {
    await listen(server, { host: '127.0.0.1', port: o.port ?? 0 });
    address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  // Ahead of expiry, not on the next request: a practice system's first call after a pause waits for nothing.
  const warm = setInterval(() => {
    const t = session.guard.tokens;
    if (t && t.expiresAt - Date.now() / 1000 < 60) session.accessToken().catch((err: unknown) => o.log?.(`terminus-client serve: refresh failed: ${(err as Error).message}`));
  }, o.keepWarmMs ?? 15_000);
  warm.unref();
  return {
    address,
    close: async () => {
      clearInterval(warm);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      if (o.socket) fs.rmSync(o.socket, { force: true });
    },
  };
}

async function handle(session: ClientSession, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://proxy.invalid');
  if (url.pathname === '/api/health' && req.method === 'GET') {
    const st = session.status();
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify({ status: st.logged_in ? 'ok' : 'not_logged_in', ...st }));
    return;
  }
  if (url.pathname !== '/fhir' && !url.pathname.startsWith('/fhir/')) {
    proxyError(res, 404, 'not_proxied', `only /fhir and /api/health are served here, not ${url.pathname}`);
    return;
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  const body = declared > MAX_BODY_BYTES ? 'too large' : await readBody(req);
  if (body === 'too large') {
    // Answered before the rest arrives, then the connection ends: nothing more is read.
    tooLarge(res);
    res.on('finish', () => req.destroy());
    return;
  }
  const headers = new Headers();
  for (const name of FORWARDED_HEADERS) {
    const v = req.headers[name];
    if (typeof v === 'string') headers.set(name, v);
  }
  let answer: Response;
  try {
    answer = await session.fetch(`${session.origin}${url.pathname}${url.search}`, { method: req.method, headers, body: body && body.length > 0 ? body : undefined });
  } catch (err) {
    sessionError(res, err);
    return;
  }
  const out: Record<string, string | string[]> = {};
  answer.headers.forEach((v, k) => {
    if (!HOP_HEADERS.has(k)) out[k] = v;
  });
  const setCookies = answer.headers.getSetCookie();
  if (setCookies.length > 0) out['set-cookie'] = setCookies;
  res.writeHead(answer.status, out);
  if (!answer.body || req.method === 'HEAD') {
    res.end();
    return;
  }
  Readable.fromWeb(answer.body as import('node:stream/web').ReadableStream).pipe(res);
}

/** Why the session could not carry the request: the proxy's own answer, never mistaken for the server's. */
function sessionError(res: http.ServerResponse, err: unknown): void {
  if (err instanceof LoggedOut) return proxyError(res, 401, 'logged_out', `${err.message}`);
  if (err instanceof KonnektorError) return proxyError(res, 502, 'card_unavailable', `the institution card cannot sign: ${err.message}`);
  if (err instanceof ClientInputError) return proxyError(res, 502, 'card_unavailable', err.message);
  if (err instanceof Unreachable) return proxyError(res, 502, 'server_unreachable', err.message);
  if (err instanceof GuardClientError) return proxyError(res, 502, 'login_refused', `the server's guard refused the session (${err.status}): ${err.message}`);
  proxyError(res, 502, 'proxy_failed', (err as Error).message);
}

/** 413 for a body over MAX_BODY_BYTES; the connection closes after it. */
function tooLarge(res: http.ServerResponse): void {
  res.setHeader('connection', 'close');
  proxyError(res, 413, 'body_too_large', `the request body is larger than ${MAX_BODY_BYTES} bytes`);
}

function proxyError(res: http.ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', [PROXY_ERROR_HEADER]: code, 'cache-control': 'no-store' }).end(JSON.stringify({ error: code, message }));
}

function readBody(req: http.IncomingMessage): Promise<Buffer | 'too large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        req.pause();
        resolve('too large');
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function listen(server: http.Server, where: { path: string } | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(where, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function socketAnswers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath: socket, path: '/api/health', timeout: 2000 }, (r) => {
      r.resume();
      resolve(true);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}
