import http from 'node:http';
import { createApp } from '../../src/app';
import { answerClientErrors, startServer, type RunningServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { fuzzCase, type FuzzCase } from './cases';

export interface Finding {
  seed: number;
  index: number;
  guarded: boolean;
  what: string;
  method: string;
  path: string;
  status: number;
  detail: string;
}

export interface FuzzReport {
  store: string;
  seed: number;
  cases: number;
  seconds: number;
  byStatus: Record<string, number>;
  findings: Finding[];
  /** Heap in use after a full collection (MiB), at the start and after each quarter of the run. */
  heapMiB: number[];
  rssMiB: number[];
}

/** One fuzz target: the server as `terminus serve` runs it (jobs, subscriptions, demo data), plus an enforcing app on the same store. */
export interface FuzzTarget {
  store: string;
  url: string;
  guardedUrl: string;
  close(): Promise<void>;
}

export async function startFuzzTarget(o: { pglite: boolean; logLevel?: string }): Promise<FuzzTarget> {
  const ctx = await createTestContext({ pglite: o.pglite, env: { LOG_LEVEL: o.logLevel ?? 'silent', DEMO_DATA: 'true', RATE_LIMIT_PER_IP: '100000000', RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_CLIENT: '100000000' } });
  let server: RunningServer | undefined;
  let guarded: http.Server | undefined;
  try {
    server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1' }, ctx);
    guarded = http.createServer(createApp({ ...ctx, config: { ...ctx.config, guardEnforcement: true } }));
    answerClientErrors(guarded);
    await new Promise<void>((resolve) => guarded!.listen(0, '127.0.0.1', resolve));
  } catch (err) {
    await server?.close();
    await ctx.db.close();
    throw err;
  }
  const { port } = guarded.address() as { port: number };
  return {
    store: ctx.db.kind === 'pg' ? 'PostgreSQL' : 'PGlite',
    url: server.url,
    guardedUrl: `http://127.0.0.1:${port}`,
    close: async () => {
      await new Promise<void>((resolve) => guarded!.close(() => resolve()));
      // startServer was given the context: closing the server leaves the store to us.
      await server!.close();
      await ctx.db.close().catch(() => undefined);
    },
  };
}

/** Sends `cases` cases of `seed` (one in ten at the enforcing app), `concurrency` at a time. */
export async function runFuzz(target: FuzzTarget, o: { seed: number; cases: number; concurrency?: number; timeoutMs?: number; onProgress?: (done: number) => void }): Promise<FuzzReport> {
  const byStatus: Record<string, number> = {};
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
  let next = 0;
  let done = 0;
  const worker = async () => {
    for (let i = next++; i < o.cases; i = next++) {
      const guarded = i % 10 === 9;
      const c = fuzzCase(o.seed, i, guarded);
      const r = await send(guarded ? target.guardedUrl : target.url, c, o.timeoutMs ?? 30_000);
      byStatus[String(r.status)] = (byStatus[String(r.status)] ?? 0) + 1;
      const problem = judge(c, r);
      if (problem) findings.push({ seed: o.seed, index: i, guarded, what: c.what, method: c.method, path: c.path.slice(0, 300), status: r.status, detail: problem });
      done++;
      if (done % quarter === 0) {
        sample();
        o.onProgress?.(done);
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 4 }, worker));
  return { store: target.store, seed: o.seed, cases: o.cases, seconds: Number(((performance.now() - started) / 1000).toFixed(1)), byStatus, findings, heapMiB, rssMiB };
}

export interface Answer {
  status: number;
  contentType: string;
  body: string;
  error?: string;
}

export function send(base: string, c: FuzzCase, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve) => {
    let req: http.ClientRequest;
    try {
      req = http.request(`${base}${c.path}`, { method: c.method, headers: { ...c.headers, ...(c.body ? { 'content-length': String(c.body.length) } : {}) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (x: Buffer) => chunks.push(x));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => resolve({ status: 0, contentType: '', body: '', error: err.message }));
      });
    } catch (err) {
      // A case Node's client will not send (a header value it refuses): not the server's fault.
      return resolve({ status: -1, contentType: '', body: '', error: (err as Error).message });
    }
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ status: 0, contentType: '', body: '', error: err.message }));
    req.end(c.body);
  });
}

/** What is wrong with an answer, or undefined: a 5xx, no answer, or an error body that is not the documented shape. */
function judge(c: FuzzCase, r: Answer): string | undefined {
  if (r.status === -1) return undefined;
  if (r.status === 0) return `no answer: ${r.error}`;
  if (r.status >= 500) return `${r.status}: ${r.body.slice(0, 300)}`;
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
