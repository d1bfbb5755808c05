import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { Pool } from 'pg';
import { listeningUrl } from './helpers/serve';
import { entryArgs } from './helpers/entry';

/**
 * Tracing (docs/requirements.md#practice-page-and-operations): `terminus serve` with the standard
 * OTEL_* variables exports traces over OTLP to a collector (here a loopback receiver of OTLP/HTTP
 * JSON): the request's server span, the SQL statements it ran and the Redis commands of the guard,
 * in one trace per request, under the service name `terminus`. Without the variables nothing is
 * exported (the other tests).
 */
const pgUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;
const describeTracing = pgUrl && redisUrl ? describe : describe.skip;
let seen: Span[] = [];
const spansSeen = () => seen;

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  service: string;
}

describeTracing('OpenTelemetry traces', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-otel-'));
  const database = `otel_${crypto.randomBytes(5).toString('hex')}`;
  const spans: Span[] = [];
  seen = spans;
  let collector: http.Server;
  let server: ChildProcess;
  let url: string;

  beforeAll(async () => {
    const root = new Pool({ connectionString: pgUrl, max: 1 });
    await root.query(`CREATE DATABASE ${database}`).finally(() => root.end());
    collector = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces') spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const dbUrl = new URL(pgUrl as string);
    dbUrl.pathname = `/${database}`;
    server = spawn(process.execPath, [...entryArgs(path.join(__dirname, '..', 'src', 'main.ts')), 'serve'], {
      env: {
        PATH: process.env.PATH,
        PORT: '0',
        METRICS_PORT: '0',
        DATA_DIR: dir,
        DATABASE_URL: dbUrl.toString(),
        REDIS_URL: redisUrl,
        DEMO_DATA: 'false',
        GUARD_ENFORCEMENT: 'off',
        LOG_LEVEL: 'info',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '200',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    url = await listeningUrl(server);
  }, 180_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGKILL');
      await exited;
    }
    await new Promise<void>((resolve) => collector.close(() => resolve()));
    const root = new Pool({ connectionString: pgUrl, max: 1 });
    root.on('error', () => undefined);
    await root.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).finally(() => root.end());
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a FHIR search and a guard request: server spans with their SQL and Redis spans in the same trace', async () => {
    expect((await fetch(`${url}/fhir/Patient?_count=1`)).status).toBe(200);
    const discovery = (await (await fetch(`${url}/.well-known/oauth-authorization-server`)).json()) as { nonce_endpoint: string };
    expect((await fetch(`${url}${new URL(discovery.nonce_endpoint).pathname}`)).status).toBe(200);

    const search = await eventually(() => spans.find((s) => s.kind === 2 && String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? '').startsWith('/fhir/Patient')));
    expect(search.service).toBe('terminus');
    const sql = await eventually(() => spans.find((s) => s.traceId === search.traceId && (s.attributes['db.system.name'] ?? s.attributes['db.system']) === 'postgresql' && s.name.startsWith('pg.query')));
    expect(String(sql.attributes['db.statement'] ?? sql.attributes['db.query.text'])).toMatch(/SELECT/i);

    const nonce = await eventually(() => spans.find((s) => s.kind === 2 && /\/nonce$/.test(String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? ''))));
    const redis = await eventually(() => spans.find((s) => s.traceId === nonce.traceId && (s.attributes['db.system.name'] ?? s.attributes['db.system']) === 'redis'));
    // The command, not its keys and values (client ids, token ids, addresses).
    expect(String(redis.attributes['db.query.text'] ?? redis.attributes['db.statement'])).toMatch(/^[a-z]+$/);

    // Probes are not traced.
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(spans.filter((s) => s.kind === 2 && /^\/(healthz|readyz)/.test(String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? '')))).toEqual([]);
  });

  test('SIGTERM flushes what is buffered and ends the process cleanly', async () => {
    const before = spans.length;
    expect((await fetch(`${url}/fhir/Slot?_count=1`)).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(spans.slice(before).some((s) => s.kind === 2 && String(s.attributes['http.target'] ?? s.attributes['url.path'] ?? '').startsWith('/fhir/Slot'))).toBe(true);
  });
});

/** OTLP/HTTP JSON (opentelemetry-proto's JSON mapping) to flat spans. */
function spansOf(body: {
  resourceSpans?: { resource?: { attributes?: Attr[] }; scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: Attr[] }[] }[] }[];
}): Span[] {
  const out: Span[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(attributes(rs.resource?.attributes)['service.name']);
    for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) out.push({ ...s, attributes: attributes(s.attributes), service });
  }
  return out;
}

type Attr = { key: string; value: Record<string, unknown> };
function attributes(list: Attr[] = []): Record<string, unknown> {
  return Object.fromEntries(list.map((a) => [a.key, Object.values(a.value)[0]]));
}

async function eventually<T>(find: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = find();
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`span not exported in time; got ${JSON.stringify(spansSeen().map((s) => [s.name, s.kind, s.traceId.slice(0, 6)]))}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

