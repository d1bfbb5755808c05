import http from 'node:http';

export interface LoadResult {
  requests: number;
  durationS: number;
  rps: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  errors: number;
  statuses: Record<number, number>;
  /** The first answer of an unexpected status: request, status and the start of the body. */
  firstError?: string;
}

export interface LoadRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Closed-loop load: `connections` keep-alive clients, each sending its next request as soon as
 * the previous answer arrives, for `durationMs`. Every latency is recorded, so percentiles are
 * exact (no histogram buckets). Bounded in time and count; loopback only.
 */
export async function runLoad(opts: {
  baseUrl: string;
  connections: number;
  durationMs: number;
  maxRequests?: number;
  next: (client: number, n: number) => LoadRequest | Promise<LoadRequest>;
  expectStatus?: (status: number) => boolean;
}): Promise<LoadResult> {
  const url = new URL(opts.baseUrl);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) throw new Error('load tests target loopback only');
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  let errors = 0;
  let firstError: string | undefined;
  let sent = 0;
  const started = performance.now();
  const deadline = started + opts.durationMs;
  const maxRequests = opts.maxRequests ?? Number.POSITIVE_INFINITY;
  const client = async (id: number) => {
    let n = 0;
    while (performance.now() < deadline && sent < maxRequests) {
      sent++;
      const req = await opts.next(id, n++);
      const t0 = performance.now();
      try {
        const { status, body } = await send(url, agent, req);
        latencies.push(performance.now() - t0);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (opts.expectStatus && !opts.expectStatus(status)) {
          errors++;
          firstError ??= `${req.method ?? 'GET'} ${req.path.slice(0, 200)}: ${status} ${body ?? ''}`;
        }
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, (_, i) => client(i)));
  const durationS = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] : NaN);
  return {
    requests: latencies.length,
    durationS,
    rps: latencies.length / durationS,
    p50: pct(50),
    p95: pct(95),
    p99: pct(99),
    mean: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
    errors,
    statuses,
    ...(firstError ? { firstError } : {}),
  };
}

/** The status, and for an answer of 300 or above the start of its body (what the load reports of its first unexpected answer). */
function send(base: URL, agent: http.Agent, req: LoadRequest): Promise<{ status: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const r = http.request(
      { host: base.hostname, port: base.port, path: req.path, method: req.method ?? 'GET', headers: req.headers, agent },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status < 300) {
          res.resume();
          res.on('end', () => resolve({ status }));
          return;
        }
        let body = '';
        res.on('data', (c: Buffer) => {
          if (body.length < 600) body += c.toString('utf8');
        });
        res.on('end', () => resolve({ status, body: body.slice(0, 600) }));
      },
    );
    r.on('error', reject);
    r.setTimeout(30000, () => r.destroy(new Error('timeout')));
    r.end(req.body);
  });
}

export const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '-');

export function row(name: string, r: LoadResult): string {
  return `| ${name} | ${r.requests} | ${r.rps.toFixed(0)} | ${ms(r.mean)} | ${ms(r.p50)} | ${ms(r.p95)} | ${ms(r.p99)} | ${r.errors} |`;
}

export const TABLE_HEAD = '| scenario | requests | req/s | mean ms | p50 ms | p95 ms | p99 ms | errors |\n|---|---|---|---|---|---|---|---|';
