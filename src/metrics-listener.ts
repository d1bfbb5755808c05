import http from 'node:http';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { AppContext } from './context';
import { ConfigError, type Config } from './config';
import { metricsRegistry } from './server-lib/metrics';

/** Process metrics (CPU, memory, event-loop lag, GC) once per process, beside Terminus's own. */
const processRegistry = new Registry();
let processMetrics = false;

/**
 * `GET /metrics` (Prometheus text format) on its own listener, METRICS_HOST:METRICS_PORT
 * (docs/requirements.md#practice-page-and-operations): the counters of server-lib/metrics.ts plus
 * gauges read at scrape time (jobs by state, subscription backlog, database pool, Redis). A
 * dependency that is down leaves its gauges out of that scrape; the answer still comes.
 */
export async function startMetricsListener(config: Config, ctx: AppContext): Promise<http.Server | undefined> {
  if (config.metricsPort === 0) return undefined;
  if (!processMetrics) {
    collectDefaultMetrics({ register: processRegistry, prefix: 'terminus_' });
    processMetrics = true;
  }
  const registry = Registry.merge([metricsRegistry, processRegistry, scrapeGauges(ctx)]);
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}\n`),
    );
  });
  await listen(server, config);
  return server;
}

/**
 * Binds METRICS_HOST:METRICS_PORT and lets go again, so that start-up refuses a taken metrics port
 * together with HOST and PORT, before the store is opened (the listener itself starts last).
 */
export async function metricsAddressIsFree(config: Config): Promise<void> {
  if (config.metricsPort === 0) return;
  const probe = http.createServer();
  await listen(probe, config);
  await new Promise((resolve) => probe.close(resolve));
}

/** Listen errors name the variable to change. */
function listen(server: http.Server, config: Config): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const at = `${config.metricsHost}:${config.metricsPort}`;
      if (err.code === 'EADDRINUSE') return reject(new ConfigError('METRICS_PORT', `${at} is already in use by another process (0 switches metrics off)`));
      if (err.code === 'EACCES') return reject(new ConfigError('METRICS_PORT', `no permission to listen on ${at}`));
      if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN' || err.code === 'EAI_NONAME') {
        return reject(new ConfigError('METRICS_HOST', `cannot listen on "${config.metricsHost}": not an address of this machine`));
      }
      reject(err);
    });
    server.listen(config.metricsPort, config.metricsHost, () => resolve());
  });
}

/** The store is away: this scrape goes without the gauges that read it. */
async function quietly(f: () => Promise<void>): Promise<void> {
  try {
    await f();
  } catch {
    // Left out of this scrape.
  }
}

function scrapeGauges(ctx: AppContext): Registry {
  const registry = new Registry();
  /** A gauge per value of one column, counted by `sql` (columns `label`, `n`) at each scrape. */
  const countBy = (name: string, help: string, label: string, sql: string) =>
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [registry],
      async collect() {
        this.reset();
        await quietly(async () => {
          const { rows } = await ctx.db.query<{ label: string; n: string }>(sql);
          for (const r of rows) this.set({ [label]: r.label }, Number(r.n));
        });
      },
    });
  countBy('terminus_jobs', 'Asynchronous requests (jobs) by state', 'state', 'SELECT state AS label, count(*) AS n FROM async_job GROUP BY state');
  countBy('terminus_subscriptions', 'Live subscriptions by status', 'status', 'SELECT status AS label, count(*) AS n FROM subscription_channel WHERE NOT deleted GROUP BY status');
  new Gauge({
    name: 'terminus_subscription_backlog_events',
    help: 'Events matched but not yet acknowledged by the endpoint, over all live subscriptions',
    registers: [registry],
    async collect() {
      await quietly(async () => {
        const { rows } = await ctx.db.query<{ n: string | null }>('SELECT sum(greatest(events_since_start - delivered_through, 0)) AS n FROM subscription_channel WHERE NOT deleted');
        this.set(Number(rows[0]?.n ?? 0));
      });
    },
  });
  new Gauge({
    name: 'terminus_db_pool_connections',
    help: 'PostgreSQL pool connections: total, idle, and requests waiting for one',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const p = ctx.db.poolState?.();
      if (!p) return;
      this.set({ state: 'total' }, p.total);
      this.set({ state: 'idle' }, p.idle);
      this.set({ state: 'waiting' }, p.waiting);
    },
  });
  new Gauge({
    name: 'terminus_redis_up',
    help: '1 when the shared Redis connection is ready, 0 when it is not (absent without REDIS_URL)',
    registers: [registry],
    collect() {
      if (ctx.redis) this.set(ctx.redis.status === 'ready' ? 1 : 0);
    },
  });
  return registry;
}
