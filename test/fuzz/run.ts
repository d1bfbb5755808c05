import http, { type OutgoingHttpHeaders } from 'node:http';
import pino from 'pino';
import { connectRedis, startServer, type RunningServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { credentialName, fuzzCase, SESSION_KINDS, type FuzzCase } from './cases';
import { athOf, prepareIdentities, proofFor, type Identities, type ProofOptions, type Sessions } from './sessions';

/** PUBLIC_URL of the fuzz target: every proof's `htu` names it, whatever address the server listens on. */
const PUBLIC_URL = 'http://localhost:8080';

export interface Finding {
  seed: number;
  index: number;
  /** Who sent it: a session kind, `owner+htu` (a session with a flaw), `broken`, `none`. */
  caller: string;
  what: string;
  method: string;
  path: string;
  status: number;
  detail: string;
  /** The server's error for this request (its log line: error type, message, first frame in src/), or why there is none. */
  cause: string;
}

/** Findings of one cause: how many, with which statuses, and the first to replay. */
export interface Root {
  cause: string;
  count: number;
  statuses: Record<string, number>;
  replay: string;
  example: string;
}

export interface FuzzReport {
  store: string;
  seed: number;
  cases: number;
  seconds: number;
  byStatus: Record<string, number>;
  /** Statuses per caller: the sessions must mostly pass the enforcement point (no 401). */
  byCaller: Record<string, Record<string, number>>;
  findings: Finding[];
  roots: Root[];
  /** Error lines (level error and up) of the server that belong to no request (jobs, deliveries), with the first few. */
  backgroundErrors: { count: number; first: string[] };
  /** Login rounds of the four sessions (they are renewed before their tokens expire). */
  logins: number;
  /** Heap in use after a full collection (MiB), at the start and after each quarter of the run. */
  heapMiB: number[];
  rssMiB: number[];
}

interface LogEntry {
  level: number;
  msg?: string;
  requestId?: string;
  err?: { type?: string; message?: string; stack?: string };
  [k: string]: unknown;
}

/**
 * The server's warnings and errors, kept by request id (the `X-Request-Id` of the answer), so a
 * finding names its cause; entries of a request are taken once its answer is in.
 */
export class ServerLog {
  private readonly byRequest = new Map<string, LogEntry[]>();
  backgroundCount = 0;
  readonly background: string[] = [];

  /** The last errors of any request, for a failure outside the cases (a login of the sessions). */
  readonly recent: string[] = [];

  write(line: string): void {
    let entry: LogEntry;
    try {
      entry = JSON.parse(line) as LogEntry;
    } catch {
      return;
    }
    if (entry.level >= 50) {
      this.recent.push(causeOf(entry));
      if (this.recent.length > 10) this.recent.shift();
    }
    if (typeof entry.requestId !== 'string') {
      if (entry.level < 50) return; // warnings of the run's own making (a development CA, hooks on a closed port)
      this.backgroundCount++;
      if (this.background.length < 20) this.background.push(causeOf(entry));
      return;
    }
    const list = this.byRequest.get(entry.requestId) ?? [];
    list.push(entry);
    this.byRequest.set(entry.requestId, list);
    // Lines logged after their answer was read: the oldest go.
    if (this.byRequest.size > 1000) this.byRequest.delete(this.byRequest.keys().next().value!);
  }

  take(requestId: string | undefined): LogEntry[] {
    if (!requestId) return [];
    const list = this.byRequest.get(requestId) ?? [];
    this.byRequest.delete(requestId);
    return list;
  }
}

/** `Type: message @ src/file.ts:line`, numbers as N and single-quoted input as '…', so one cause is one line whatever the values. */
function causeOf(entry: LogEntry): string {
  const err = entry.err;
  if (!err) return `${entry.msg ?? 'log line'} (no error)`;
  const frame = err.stack
    ?.split('\n')
    .find((l) => l.includes('/src/'))
    ?.replace(/^.*\/(src\/[^:)]+:\d+).*$/, '$1');
  const message = (err.message ?? '').replace(/'[^']*'/g, "'…'").replace(/\d+/g, 'N');
  return `${err.type ?? 'Error'}: ${message.slice(0, 200)}${frame ? ` @ ${frame}` : ''}`;
}

/**
 * The server as `terminus serve` runs it (jobs, subscriptions, demo data; Redis when REDIS_URL is
 * set and the store is PostgreSQL) with the guard enforcing, and a session of every kind.
 */
export interface FuzzTarget {
  store: string;
  url: string;
  publicUrl: string;
  sessions: Sessions;
  log: ServerLog;
  close(): Promise<void>;
}

export async function startFuzzTarget(o: { pglite: boolean }): Promise<FuzzTarget> {
  const identities: Identities = await prepareIdentities(PUBLIC_URL);
  let server: RunningServer | undefined;
  try {
    const ctx = await createTestContext({
      pglite: o.pglite,
      env: {
        ...identities.env,
        PUBLIC_URL,
        GUARD_ENFORCEMENT: 'on',
        DEMO_DATA: 'true',
        RATE_LIMIT_PER_IP: '100000000',
        RATE_LIMIT_FHIR_PER_CLIENT: '100000000',
        RATE_LIMIT_PER_CLIENT: '100000000',
      },
    });
    const log = new ServerLog();
    ctx.logger = pino({ level: 'warn', base: { service: 'terminus' } }, { write: (line: string) => log.write(line) });
    try {
      // As `terminus serve` with REDIS_URL: the guard's shared state and the job queue in Redis.
      const redisUrl = o.pglite ? undefined : process.env.REDIS_URL;
      if (redisUrl) ctx.redis = await connectRedis(redisUrl, ctx.logger);
      server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1' }, ctx);
    } catch (err) {
      ctx.redis?.disconnect();
      await ctx.db.close();
      throw err;
    }
    const running = server;
    const sessions = await identities.open(running.url, ctx).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}; the server's last errors: ${log.recent.join(' | ') || 'none'}`);
    });
    return {
      store: ctx.db.kind === 'pg' ? (ctx.redis ? 'PostgreSQL + Redis' : 'PostgreSQL') : 'PGlite',
      url: running.url,
      publicUrl: PUBLIC_URL,
      sessions,
      log,
      close: async () => {
        // startServer was given the context: closing the server closes the store too.
        await running.close();
        await identities.close();
      },
    };
  } catch (err) {
    await server?.close();
    await identities.close();
    throw err;
  }
}

/** Who sent a case, for the statuses per caller: a session kind, `flawed`, `broken`, `none`, or `guard` (the authorization server's endpoints). */
function callerOf(c: FuzzCase): string {
  if (c.auth.session) return c.auth.flaw ? 'flawed' : c.auth.session;
  if (!c.path.startsWith('/fhir')) return 'guard';
  return credentialName(c);
}

/** The cases sent and not yet answered (`seed:index`): the suspects when the server's process dies. */
export const inFlight = new Set<string>();

/** Sends `cases` cases of `seed`, `concurrency` at a time, each with its credentials. */
export async function runFuzz(target: FuzzTarget, o: { seed: number; cases: number; concurrency?: number; timeoutMs?: number; onProgress?: (done: number, findings: number) => void; progressEvery?: number }): Promise<FuzzReport> {
  const byStatus: Record<string, number> = {};
  const byCaller: Record<string, Record<string, number>> = {};
  const findings: Finding[] = [];
  const heapMiB: number[] = [];
  const rssMiB: number[] = [];
  const sample = () => {
    (globalThis as { gc?: () => void }).gc?.();
    const m = process.memoryUsage();
    heapMiB.push(Math.round(m.heapUsed / 2 ** 20));
    rssMiB.push(Math.round(m.rss / 2 ** 20));
  };
  sample();
  const started = performance.now();
  const quarter = Math.max(1, Math.floor(o.cases / 4));
  const every = o.progressEvery ?? quarter;
  const loginsBefore = target.sessions.logins;
  const backgroundBefore = target.log.backgroundCount;
  let next = 0;
  let done = 0;
  const worker = async () => {
    for (let i = next++; i < o.cases; i = next++) {
      target.sessions.tick();
      const c = fuzzCase(o.seed, i);
      inFlight.add(`${o.seed}:${i}`);
      const r = await send(target, c, o.timeoutMs ?? 30_000);
      inFlight.delete(`${o.seed}:${i}`);
      const status = String(r.status);
      byStatus[status] = (byStatus[status] ?? 0) + 1;
      const caller = (byCaller[callerOf(c)] ??= {});
      caller[status] = (caller[status] ?? 0) + 1;
      const problem = judge(c, r);
      if (problem) findings.push({ seed: o.seed, index: i, caller: credentialName(c), what: c.what, method: c.method, path: c.path.slice(0, 300), status: r.status, detail: problem, cause: r.log.length ? r.log.map(causeOf).join(' | ') : 'nothing logged' });
      done++;
      if (done % quarter === 0) sample();
      if (done % every === 0) o.onProgress?.(done, findings.length);
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 4 }, worker));
  return {
    store: target.store,
    seed: o.seed,
    cases: o.cases,
    seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    byStatus,
    byCaller,
    findings,
    roots: rootsOf(findings),
    backgroundErrors: { count: target.log.backgroundCount - backgroundBefore, first: target.log.background.slice(0, 5) },
    logins: target.sessions.logins - loginsBefore,
    heapMiB,
    rssMiB,
  };
}

/** The cause a finding is grouped under: the server's error, else the answer with numbers as N. */
export function rootOf(f: Finding): string {
  return f.cause === 'nothing logged' ? `nothing logged: ${f.detail.replace(/\d+/g, 'N').slice(0, 120)}` : f.cause;
}

function rootsOf(findings: Finding[]): Root[] {
  const roots = new Map<string, Root>();
  for (const f of findings) {
    const cause = rootOf(f);
    let root = roots.get(cause);
    if (!root) roots.set(cause, (root = { cause, count: 0, statuses: {}, replay: `${f.seed}:${f.index}`, example: `${f.caller} ${f.method} ${f.path.slice(0, 160)}` }));
    root.count++;
    root.statuses[f.status] = (root.statuses[f.status] ?? 0) + 1;
  }
  return [...roots.values()].sort((a, b) => b.count - a.count);
}

export interface Answer {
  status: number;
  contentType: string;
  body: string;
  error?: string;
  /** The server's log lines for this request. */
  log: LogEntry[];
}

/** The case as it goes on the wire: its path and headers with the credentials of `c.auth` (a fresh proof each time). */
export function wireRequest(target: FuzzTarget, c: FuzzCase): { path: string; headers: OutgoingHttpHeaders } {
  const headers: OutgoingHttpHeaders = { ...c.headers };
  if (c.body) headers['content-length'] = String(c.body.length);
  const { session, flaw } = c.auth;
  if (!session) return { path: c.path, headers };
  const s = target.sessions.get(session);
  const other = target.sessions.get(SESSION_KINDS[(SESSION_KINDS.indexOf(session) + 1) % SESSION_KINDS.length]);
  // RFC 9449 §4.2: htu is the request URL without query and fragment; the guard builds it from PUBLIC_URL.
  const htu = `${target.publicUrl}${c.path.split(/[?#]/)[0]}`;
  const now = Math.floor(Date.now() / 1000);
  let path = c.path;
  let token = s.accessToken;
  let scheme = 'DPoP';
  let proofMethod = c.method;
  let proofUrl = htu;
  const o: ProofOptions = {};
  switch (flaw) {
    case 'htu':
      proofUrl = `${target.publicUrl}/fhir/Other`;
      break;
    case 'htm':
      proofMethod = c.method === 'GET' ? 'POST' : 'GET';
      break;
    case 'ath':
      o.claims = { ath: other.ath };
      break;
    case 'stale':
      o.claims = { iat: now - 3600 };
      break;
    case 'future':
      o.claims = { iat: now + 3600 };
      break;
    case 'other-key':
      o.key = other.key;
      break;
    case 'bearer':
      scheme = 'Bearer';
      break;
    case 'lower-scheme':
      scheme = 'dpop';
      break;
    case 'token-in-query': {
      const hash = path.indexOf('#');
      const [before, after] = hash < 0 ? [path, ''] : [path.slice(0, hash), path.slice(hash)];
      path = `${before}${before.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(token)}${after}`;
      break;
    }
    case 'tampered': {
      token = `${token.slice(0, -2)}${token.at(-2) === 'A' ? 'B' : 'A'}${token.at(-1)}`;
      o.claims = { ath: athOf(token) }; // the proof matches the token sent: its signature is what fails
      break;
    }
    case 'nonce':
      o.claims = { nonce: 42 };
      break;
    case 'long-jti':
      o.claims = { jti: 'j'.repeat(300) };
      break;
    case 'htu-query':
      proofUrl = `${htu}?x=1`;
      break;
  }
  headers.authorization = `${scheme} ${token}`;
  if (flaw !== 'no-proof') headers.dpop = flaw === 'two-proofs' ? [proofFor(s, proofMethod, proofUrl), proofFor(s, proofMethod, proofUrl)] : proofFor(s, proofMethod, proofUrl, o);
  return { path, headers };
}

export function send(target: FuzzTarget, c: FuzzCase, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      const wire = wireRequest(target, c);
      req = http.request(`${target.url}${wire.path}`, { method: c.method, headers: wire.headers }, (res) => {
        const chunks: Buffer[] = [];
        const log = () => target.log.take(res.headers['x-request-id'] as string | undefined);
        res.on('data', (x: Buffer) => chunks.push(x));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8'), log: log() }));
        res.on('error', (err) => resolve({ status: 0, contentType: '', body: '', error: err.message, log: log() }));
      });
    } catch (err) {
      // A case Node's client will not send (a header value it refuses): not the server's fault.
      return resolve({ status: -1, contentType: '', body: '', error: (err as Error).message, log: [] });
    }
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ status: 0, contentType: '', body: '', error: err.message, log: [] }));
    req.end(c.body);
  });
}

/**
 * What is wrong with an answer, or undefined: a 5xx, no answer, an error body that is not the
 * documented shape, or a valid session's request refused as unauthenticated.
 */
function judge(c: FuzzCase, r: Answer): string | undefined {
  if (r.status === -1) return undefined;
  if (r.status === 0) return `no answer: ${r.error}`;
  if (r.status >= 500) return `${r.status}: ${r.body.slice(0, 300)}`;
  if (r.status === 401 && c.auth.session && (!c.auth.flaw || c.auth.flaw === 'htu-query') && c.path.startsWith('/fhir')) return `401 for a valid ${c.auth.session} session: ${r.body.slice(0, 300)}`;
  if (r.status >= 400 && c.method !== 'HEAD' && /json/.test(r.contentType)) {
    let body: { resourceType?: string; error?: string };
    try {
      body = JSON.parse(r.body) as typeof body;
    } catch {
      return `${r.status} with a JSON content type and a body that is not JSON`;
    }
    if (body.resourceType !== 'OperationOutcome' && typeof body.error !== 'string') return `${r.status} without an OperationOutcome or error object: ${r.body.slice(0, 200)}`;
  }
  return undefined;
}
