import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import type { Config } from './config';
import type { AppContext } from './context';
import { guardSettings, InvalidWorkloadRequest, issueWorkloadToken, SigningKeys } from './guard';

/**
 * `terminus workload-token` beside a running server: the embedded store admits one process
 * (DATA_DIR is locked), and without GUARD_KEY_SECRET a second process could not open the server's
 * signing keys, so it would add a key of its own to jwks_uri on every call. The server therefore
 * mints the token itself, with its current signing key, for a caller on this machine: an HTTP
 * request over a unix socket in DATA_DIR, mode 600, so only the user the server runs as (who can
 * read DATA_DIR's keys anyway) can ask. No TCP port, no secret to hand around.
 */
export const WORKLOAD_SOCKET = 'terminus.sock';

/** Longest unix socket path Linux and macOS accept (sun_path less its terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 103;
const MAX_BODY_BYTES = 8192;
const ASK_TIMEOUT_MS = 15_000;

export interface WorkloadTokenRequest {
  sub: string;
  aud: string[];
  ttlSec: number;
}

export function workloadSocketPath(config: Config): string {
  return path.join(config.dataDir, WORKLOAD_SOCKET);
}

/**
 * Whether a server opens the socket: where a second process cannot mint with the server's key on
 * its own (the embedded store, or keys sealed with a per-process key). With PostgreSQL and
 * GUARD_KEY_SECRET every process opens the same keys, and the command works without a server.
 */
export function workloadSocketWanted(config: Config): boolean {
  return !config.databaseUrl || !config.guardKeySecret;
}

/**
 * Serves `POST /workload-token` ({sub, aud, ttl} -> {token}) on DATA_DIR/terminus.sock. A socket
 * that cannot be had (a path too long for a socket, a DATA_DIR this user cannot write, another
 * live server on it) leaves the server running without it, with a warning: the command then says
 * what to do.
 */
export async function startWorkloadSocket(config: Config, ctx: AppContext): Promise<http.Server | undefined> {
  const file = workloadSocketPath(config);
  const unavailable = (why: string) => {
    ctx.logger.warn({ socket: file }, `terminus workload-token cannot ask this server: ${why}`);
    return undefined;
  };
  if (Buffer.byteLength(file) > MAX_SOCKET_PATH_BYTES) return unavailable(`the socket path is longer than ${MAX_SOCKET_PATH_BYTES} bytes (choose a shorter DATA_DIR)`);
  if (fs.existsSync(file)) {
    if (!fs.lstatSync(file).isSocket()) return unavailable('a file that is not a socket is in its place');
    if (await answers(file)) return unavailable('another running server already answers on it');
    // Left by a server that did not stop cleanly.
    fs.rmSync(file, { force: true });
  }
  const settings = guardSettings(config);
  const keys = new SigningKeys(ctx, settings);
  const answer = async (req: http.IncomingMessage): Promise<[number, Record<string, unknown>]> => {
    if (req.method !== 'POST' || req.url !== '/workload-token') return [404, { error: 'POST /workload-token' }];
    let r: WorkloadTokenRequest | string;
    try {
      r = parseRequest(await readBody(req));
    } catch (err) {
      return [400, { error: (err as Error).message }];
    }
    if (typeof r === 'string') return [400, { error: r }];
    try {
      const token = await issueWorkloadToken(keys, settings, ctx.now(), r);
      ctx.logger.info({ sub: r.sub, aud: r.aud, ttl: r.ttlSec }, 'workload token issued to a local caller');
      return [200, { token }];
    } catch (err) {
      if (err instanceof InvalidWorkloadRequest) return [400, { error: err.message }];
      ctx.logger.warn({ err: (err as Error).message }, 'workload token for a local caller failed');
      return [503, { error: (err as Error).message }];
    }
  };
  const server = http.createServer((req, res) => {
    void answer(req).then(([status, body]) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)));
  });
  try {
    fs.mkdirSync(config.dataDir, { recursive: true });
    // The socket is created with this mask: no moment in which another user could connect.
    const mask = process.umask(0o177);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(file, () => resolve());
      });
    } finally {
      process.umask(mask);
    }
    fs.chmodSync(file, 0o600);
  } catch (err) {
    server.close();
    return unavailable((err as Error).message);
  }
  return server;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
      if (text.length > MAX_BODY_BYTES) {
        reject(new Error(`the request is larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
      }
    });
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** The request, or what is wrong with it. */
function parseRequest(text: string): WorkloadTokenRequest | string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'the request must be JSON: {"sub", "aud": [...], "ttl"}';
  }
  const b = (typeof body === 'object' && body !== null ? body : {}) as { sub?: unknown; aud?: unknown; ttl?: unknown };
  return { sub: b.sub as string, aud: b.aud as string[], ttlSec: b.ttl as number };
}

/** Whether a server accepts connections on the socket. */
function answers(file: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(file);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The server refused the request or failed (its words). */
export class WorkloadSocketError extends Error {}

/**
 * Asks the server of this DATA_DIR for a workload token; undefined when no server answers there
 * (no socket, or one left by a server that is gone).
 */
export function askServerForWorkloadToken(config: Config, r: WorkloadTokenRequest): Promise<string | undefined> {
  const file = workloadSocketPath(config);
  if (!fs.existsSync(file)) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: file, method: 'POST', path: '/workload-token', headers: { 'content-type': 'application/json' }, timeout: ASK_TIMEOUT_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let body: { token?: unknown; error?: unknown } = {};
        try {
          body = JSON.parse(text) as typeof body;
        } catch {
          // Reported below with the status.
        }
        if (res.statusCode === 200 && typeof body.token === 'string') return resolve(body.token);
        reject(new WorkloadSocketError(`the server on ${file} refused: ${typeof body.error === 'string' ? body.error : `HTTP ${res.statusCode}`}`));
      });
    });
    req.on('timeout', () => req.destroy(new WorkloadSocketError(`the server on ${file} did not answer within ${ASK_TIMEOUT_MS / 1000} s`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') return resolve(undefined);
      if (err.code === 'EACCES') return reject(new WorkloadSocketError(`no permission to use ${file}: run the command as the user the server runs as`));
      reject(err);
    });
    req.end(JSON.stringify({ sub: r.sub, aud: r.aud, ttl: r.ttlSec }));
  });
}
