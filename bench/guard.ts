/**
 * Access-guard benchmark: discovery, /nonce, token exchange and refresh at 32 concurrent
 * clients against `terminus serve` in its own process, and node-oidc-provider's refresh grant with
 * DPoP and the baseline revision's token exchange and refresh measured in the same run. Loopback
 * only, bounded in time.
 *
 *   node --import tsx bench/guard.ts            (writes the guard section of bench/RESULTS.md)
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createClientAssertion, createDpopProof, generateEcKey, type EcKey } from '../src/client/crypto';
import { softwareClientStatement } from '../src/client/client-statement';
import { createSubjectToken, SoftwareCard } from '../src/client/software-card';
import { createDevPki, writeDevPki } from '../src/guard/pki/dev-pki';
import { Pool } from 'pg';
import { checkout } from './compare';
import { cpuMeter, loadAverage } from './lib/cpu';
import { freePort, serverNode, startFloorServer, startServerProcess } from './lib/server';

const CONNECTIONS = 32;
const DURATION_MS = Number(process.env.BENCH_GUARD_MS ?? 15_000);
const ROUNDS = 5;
const ROUND_MS = Number(process.env.BENCH_GUARD_ROUND_MS ?? 5_000);
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

interface Reply {
  status: number;
  body: string;
}

interface Stats {
  requests: number;
  rps: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  errors: number;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS * 2 });

function send(base: string, method: string, p: string, headers: Record<string, string> = {}, body?: string): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const r = http.request({ host: u.hostname, port: u.port, path: p, method, headers, agent }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    r.on('error', reject);
    r.setTimeout(30_000, () => r.destroy(new Error('timeout')));
    r.end(body);
  });
}

/** Closed loop: each client prepares (untimed), then sends the timed request, until the deadline. */
async function closedLoop<S>(state: S[], step: (s: S, i: number) => Promise<{ ms: number; ok: boolean }>, durationMs = DURATION_MS): Promise<Stats> {
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    state.map(async (s, i) => {
      while (performance.now() < deadline) {
        try {
          const r = await step(s, i);
          latencies.push(r.ms);
          if (!r.ok) errors++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    mean: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
    p50: pct(50),
    p95: pct(95),
    p99: pct(99),
    errors,
  };
}

async function timed(f: () => Promise<Reply>, expect = 200): Promise<{ ms: number; ok: boolean; reply: Reply }> {
  const t0 = performance.now();
  const reply = await f();
  return { ms: performance.now() - t0, ok: reply.status === expect, reply };
}

interface Session {
  clientId: string;
  clientKey: EcKey;
  dpopKey: EcKey;
  refreshToken: string;
}

export async function benchGuard(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-guard-'));
  const pki = createDevPki();
  writeDevPki(path.join(dir, 'pki'), pki);
  const card = new SoftwareCard(pki.cards[0].certPem, pki.cards[0].keyPem);
  const env: Record<string, string> = {
    DATA_DIR: path.join(dir, 'data'),
    CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'),
    RATE_LIMIT_PER_IP: '100000000',
    RATE_LIMIT_PER_CLIENT: '100000000',
    DEMO_DATA: 'false',
  };
  const server = await startServerProcess(env);
  const base = server.url;
  const tokenUrl = `${base}/svc/v1/token`;
  const rows: string[] = [];
  let comparison = '';
  const loadAtStart = loadAverage();
  const store = process.env.DATABASE_URL ? 'PostgreSQL 15 (local)' : 'PGlite in DATA_DIR';
  const counters = process.env.REDIS_URL ? 'Redis' : 'the database';
  try {
    rows.push(row('`GET /.well-known/oauth-authorization-server`', await closedLoop(new Array(CONNECTIONS).fill(0), () => timed(() => send(base, 'GET', '/.well-known/oauth-authorization-server'))), '7.5 / 10 / 100'));
    rows.push(row('`GET /.well-known/oauth-protected-resource`', await closedLoop(new Array(CONNECTIONS).fill(0), () => timed(() => send(base, 'GET', '/.well-known/oauth-protected-resource'))), '7.5 / 10 / 100'));
    rows.push(row('`GET /svc/v1/nonce`', await closedLoop(new Array(CONNECTIONS).fill(0), () => timed(() => send(base, 'GET', '/svc/v1/nonce'))), '33 / 50 / 500'));
    // One client alone: the per-request latency gemSpec_ZETA's targets speak of.
    rows.push(row('`GET /.well-known/oauth-authorization-server`, 1 client', await closedLoop([0], () => timed(() => send(base, 'GET', '/.well-known/oauth-authorization-server'))), '7.5 / 10 / 100'));
    rows.push(row('`GET /svc/v1/nonce`, 1 client', await closedLoop([0], () => timed(() => send(base, 'GET', '/svc/v1/nonce'))), '33 / 50 / 500'));

    // 32 registered clients, each exchanging tokens in a loop (nonce fetched and JWTs signed untimed).
    const registerClients = (at: string) =>
      Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          const clientKey = await generateEcKey();
          const r = await send(at, 'POST', '/svc/v1/register', { 'content-type': 'application/json' }, JSON.stringify({ token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE, 'refresh_token'], jwks: { keys: [clientKey.publicJwk] } }));
          return { clientId: JSON.parse(r.body).client_id as string, clientKey };
        }),
      );
    const clients = await registerClients(base);
    const sessions: Session[] = [];
    const exchangeAt = (at: string) => async (c: { clientId: string; clientKey: EcKey }) => {
      const endpoint = `${at}/svc/v1/token`;
      const nonce = JSON.parse((await send(at, 'GET', '/svc/v1/nonce')).body).nonce as string;
      const dpopKey = await generateEcKey();
      const now = Math.floor(Date.now() / 1000);
      const form = new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(c.clientKey, { clientId: c.clientId, audience: endpoint, clientStatement: softwareClientStatement({ clientId: c.clientId, clientKey: c.clientKey, nonce, now }) }),
        subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
        subject_token: createSubjectToken(card, { clientId: c.clientId, telematikId: pki.cards[0].telematikId, tokenEndpoint: endpoint, nonce, clientJkt: c.clientKey.jkt, dpopJkt: dpopKey.jkt, now }),
        resource: `${at}/fhir`,
      }).toString();
      const dpop = await createDpopProof(dpopKey, { method: 'POST', url: endpoint, nonce });
      const t = await timed(() => send(at, 'POST', '/svc/v1/token', { 'content-type': 'application/x-www-form-urlencoded', dpop }, form));
      return { ...t, dpopKey };
    };
    const exchangeOnce = exchangeAt(base);
    // Token exchange against its JOSE floor, refresh against node-oidc-provider and its JOSE floor:
    // every contender up at once, rounds back to back in rotating order (the same machine load).
    const firstExchange = await exchangeOnce(clients[0]);
    const tokenBytes = firstExchange.reply.body;
    const exchangeFloor = await startFloorServer({ answers: { '/token': { body: tokenBytes, contentType: 'application/json' } }, defaultAnswer: '/token', verifies: 4, signs: 1 });
    const refreshFloor = await startFloorServer({ answers: { '/token': { body: tokenBytes, contentType: 'application/json' } }, defaultAnswer: '/token', verifies: 2, signs: 1 });
    const nop = await startOidcProvider();
    // The revision before the performance work, in its own process and store (token exchange and refresh against it in the same run, docs/requirements.md#performance-aims).
    const baseline = await startBaseline(env);
    try {
      const sampleForm = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'x'.repeat(43), client_assertion_type: JWT_BEARER, client_assertion: 'x'.repeat(400) }).toString();
      const floorStep = (url: string) => () => timed(() => send(url, 'POST', '/token', { 'content-type': 'application/x-www-form-urlencoded', dpop: 'x'.repeat(600) }, sampleForm));
      for (const c of clients) {
        const t = await exchangeOnce(c);
        sessions.push({ ...c, dpopKey: t.dpopKey, refreshToken: JSON.parse(t.reply.body).refresh_token });
      }
      const refreshAt = (at: string) => async (s: Session) => {
        const endpoint = `${at}/svc/v1/token`;
        const form = new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: s.refreshToken,
          client_assertion_type: JWT_BEARER,
          client_assertion: await createClientAssertion(s.clientKey, { clientId: s.clientId, audience: endpoint }),
        }).toString();
        const dpop = await createDpopProof(s.dpopKey, { method: 'POST', url: endpoint });
        const t = await timed(() => send(at, 'POST', '/svc/v1/token', { 'content-type': 'application/x-www-form-urlencoded', dpop }, form));
        if (t.ok) s.refreshToken = JSON.parse(t.reply.body).refresh_token;
        return t;
      };
      const refreshStep = refreshAt(base);
      const baseClients = await registerClients(baseline.url);
      const baseExchange = exchangeAt(baseline.url);
      const baseSessions: Session[] = [];
      for (const c of baseClients) {
        const t = await baseExchange(c);
        if (!t.ok) throw new Error(`baseline ${baseline.rev}: token exchange answered ${t.reply.status}: ${t.reply.body.slice(0, 300)}`);
        baseSessions.push({ ...c, dpopKey: t.dpopKey, refreshToken: JSON.parse(t.reply.body).refresh_token });
      }
      const contenders: { name: string; run: () => Promise<Stats>; pid: number }[] = [
        { name: 'exchange', run: () => closedLoop(clients, (c) => exchangeOnce(c), ROUND_MS), pid: server.pid },
        { name: 'exchange floor', run: () => closedLoop(clients, floorStep(exchangeFloor.url), ROUND_MS), pid: exchangeFloor.pid },
        { name: 'refresh', run: () => closedLoop(sessions, refreshStep, ROUND_MS), pid: server.pid },
        { name: 'refresh floor', run: () => closedLoop(sessions, floorStep(refreshFloor.url), ROUND_MS), pid: refreshFloor.pid },
        { name: 'node-oidc-provider', run: () => closedLoop(nop.sessions, nop.step, ROUND_MS), pid: nop.pid },
        { name: 'baseline exchange', run: () => closedLoop(baseClients, (c) => baseExchange(c), ROUND_MS), pid: baseline.pid },
        { name: 'baseline refresh', run: () => closedLoop(baseSessions, refreshAt(baseline.url), ROUND_MS), pid: baseline.pid },
      ];
      for (const c of contenders) await c.run(); // warm-up
      const results = new Map<string, Stats[]>(contenders.map((c) => [c.name, []]));
      const cpu = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (let j = 0; j < contenders.length; j++) {
          const c = contenders[(j + r) % contenders.length];
          const meter = cpuMeter({ server: () => [c.pid] });
          const stats = await c.run();
          results.get(c.name)!.push(stats);
          cpu.get(c.name)!.push((meter.stop().server * 1000) / Math.max(1, stats.requests));
        }
      }
      const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      const medianStats = (xs: Stats[]): Stats => ({
        requests: xs.reduce((a, x) => a + x.requests, 0),
        rps: med(xs.map((x) => x.rps)),
        mean: med(xs.map((x) => x.mean)),
        p50: med(xs.map((x) => x.p50)),
        p95: med(xs.map((x) => x.p95)),
        p99: med(xs.map((x) => x.p99)),
        errors: xs.reduce((a, x) => a + x.errors, 0),
      });
      const ratio = (a: string, b: string) => med(results.get(a)!.map((x, k) => x.rps / results.get(b)![k].rps));
      const perRound = (a: string, b: string) => results.get(a)!.map((x, k) => (x.rps / results.get(b)![k].rps).toFixed(2)).join(', ');
      const cpuMs = (name: string) => med(cpu.get(name)!).toFixed(2);
      rows.push(row('`POST /svc/v1/token` token exchange (card ES256, software attestation, embedded policy)', medianStats(results.get('exchange')!), '75 / 100 / 1000'));
      rows.push(row('`POST /svc/v1/token` refresh (rotation, DPoP, private_key_jwt, policy re-check)', medianStats(results.get('refresh')!), '75 / 100 / 1000'));
      rows.push(row('node-oidc-provider 9 refresh grant (DPoP, private_key_jwt, rotation; in-memory adapter)', medianStats(results.get('node-oidc-provider')!), '–'));
      rows.push(row(`baseline \`${baseline.rev}\` token exchange`, medianStats(results.get('baseline exchange')!), '75 / 100 / 1000'));
      rows.push(row(`baseline \`${baseline.rev}\` refresh`, medianStats(results.get('baseline refresh')!), '75 / 100 / 1000'));
      rows.push(row('JOSE floor of a token exchange (`node:http`, 4 ES256 checks + 1 signature, the same bytes)', medianStats(results.get('exchange floor')!), '–'));
      rows.push(row('JOSE floor of a refresh (`node:http`, 2 ES256 checks + 1 signature, the same bytes)', medianStats(results.get('refresh floor')!), '–'));
      rows.push(row('`POST /svc/v1/token` token exchange, 1 client', await closedLoop([clients[0]], (c) => exchangeOnce(c), ROUND_MS), '75 / 100 / 1000'));
      rows.push(row('`POST /svc/v1/token` refresh, 1 client', await closedLoop([sessions[0]], refreshStep, ROUND_MS), '75 / 100 / 1000'));
      comparison = [
        `Same run, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per contender in rotating order (median of the per-round ratios; per round in brackets):`,
        `- refresh: **${ratio('refresh', 'node-oidc-provider').toFixed(2)} x node-oidc-provider** (${perRound('refresh', 'node-oidc-provider')}); ${ratio('refresh', 'refresh floor').toFixed(2)} of its JOSE floor (${perRound('refresh', 'refresh floor')}).`,
        `- token exchange: **${ratio('exchange', 'baseline exchange').toFixed(2)} x the baseline \`${baseline.rev}\`** (${perRound('exchange', 'baseline exchange')}); ${ratio('exchange', 'exchange floor').toFixed(2)} of its JOSE floor (${perRound('exchange', 'exchange floor')}).`,
        `- refresh against the baseline: ${ratio('refresh', 'baseline refresh').toFixed(2)} x (${perRound('refresh', 'baseline refresh')}).`,
        `- server CPU per request (ms, median of rounds): token exchange ${cpuMs('exchange')} (baseline ${cpuMs('baseline exchange')}), refresh ${cpuMs('refresh')} (baseline ${cpuMs('baseline refresh')}), node-oidc-provider refresh ${cpuMs('node-oidc-provider')}, JOSE floors ${cpuMs('exchange floor')} / ${cpuMs('refresh floor')}.`,
        `- Aims (docs/requirements.md#performance-aims): token exchange at least 2 x the baseline, refresh at least 1.2 x node-oidc-provider.`,
        `- load average (1 / 5 / 15 min) ${loadAtStart} at the start, ${loadAverage()} at the end.`,
      ].join('\n');
    } finally {
      await Promise.all([exchangeFloor.stop(), refreshFloor.stop(), nop.stop(), baseline.stop()]);
    }
  } finally {
    await server.stop();
  }
  agent.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
  return [
    `Terminus \`serve\` in its own process (store: ${store}; nonces, replay caches and rate-limit counters in ${counters}), default log level; ${CONNECTIONS} concurrent clients, closed loop, keep-alive; discovery and nonce rows ${DURATION_MS / 1000} s each, token rows the median of ${ROUNDS} rotating rounds; machine: ${os.cpus().length} cores. Only the named request is timed (nonces and JWT signing of the client are not).`,
    '',
    '| scenario | requests | req/s | mean ms | p50 ms | p95 ms | p99 ms | errors | target mean / p90 / p99 ms |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    comparison,
    '',
    `Reading: with 32 clients in a closed loop on 2 cores (shared by the load generator, the server and its stores), the mean latency is about 32 / throughput, so it measures capacity more than the single-request latency the targets speak of (docs/requirements.md#performance-aims). node-oidc-provider keeps its state in process memory; Terminus's refresh re-asks the policy, rotates the family in PostgreSQL (one statement, durable) and keeps replay caches and counters in Redis. The JOSE floor is a bare \`node:http\` server doing only the signature work of the grant on cached key objects. A token exchange verifies four JWTs, a card chain (cached per certificate) and the attestation, and writes a session. The baseline is the revision before the performance work, in its own process and store, measured in the same rotating rounds. The 1-client rows give the per-request latency.`,
  ].join('\n');
}

/**
 * The baseline revision (BENCH_GUARD_BASELINE, default 52983cc: before the performance work) serving
 * the same configuration from a checkout of its own, on a store of its own: a DATA_DIR beside
 * this run's, or a fresh PostgreSQL database when DATABASE_URL is set.
 */
async function startBaseline(env: Record<string, string>): Promise<{ rev: string; url: string; pid: number; stop(): Promise<void> }> {
  const rev = process.env.BENCH_GUARD_BASELINE ?? '52983cc';
  const tree = checkout(rev);
  const databaseUrl = process.env.DATABASE_URL;
  let storeEnv: Record<string, string> = { DATA_DIR: `${env.DATA_DIR}-baseline` };
  const dropDatabase = async () => {
    const admin = new Pool({ connectionString: databaseUrl, max: 1 });
    await admin.query('DROP DATABASE IF EXISTS terminus_bench_guard_baseline WITH (FORCE)').catch(() => undefined);
    return admin;
  };
  if (databaseUrl) {
    const admin = await dropDatabase();
    await admin.query('CREATE DATABASE terminus_bench_guard_baseline');
    await admin.end();
    const url = new URL(databaseUrl);
    url.pathname = '/terminus_bench_guard_baseline';
    storeEnv = { DATABASE_URL: url.toString() };
  }
  try {
    const server = await startServerProcess({ ...env, ...storeEnv }, tree.root);
    return {
      rev,
      url: server.url,
      pid: server.pid,
      stop: async () => {
        await server.stop();
        tree.remove();
        if (databaseUrl) await (await dropDatabase()).end();
        else fs.rmSync(storeEnv.DATA_DIR, { recursive: true, force: true });
      },
    };
  } catch (err) {
    tree.remove();
    throw err;
  }
}

interface OidcProvider {
  pid: number;
  sessions: { dpopKey: EcKey; refreshToken: string }[];
  step: (s: { dpopKey: EcKey; refreshToken: string }) => Promise<{ ms: number; ok: boolean }>;
  stop(): Promise<void>;
}

async function startOidcProvider(): Promise<OidcProvider> {
  const clientKey = await generateEcKey();
  const port = String(await freePort());
  const issuer = `http://127.0.0.1:${port}`;
  const child = spawn(serverNode(), ['--import', 'tsx', path.join(__dirname, 'guard-oidc-provider-server.ts')], {
    env: { ...process.env, PORT: port, NODE_ENV: 'production', BENCH_CLIENT_JWK: JSON.stringify({ ...clientKey.publicJwk, use: 'sig', alg: 'ES256' }) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  try {
    const until = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error('oidc-provider exited');
      const ok = await send(issuer, 'GET', '/.well-known/openid-configuration').then((r) => r.status === 200, () => false);
      if (ok) break;
      if (Date.now() > until) throw new Error('oidc-provider did not start');
      await new Promise((r) => setTimeout(r, 300));
    }
    const tokenUrl = `${issuer}/token`;
    const sessions = await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        const dpopKey = await generateEcKey();
        const minted = JSON.parse((await send(issuer, 'GET', `/bench/mint?jkt=${dpopKey.jkt}`)).body) as { refresh_token: string };
        return { dpopKey, refreshToken: minted.refresh_token };
      }),
    );
    const step = async (s: { dpopKey: EcKey; refreshToken: string }) => {
      const form = new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: s.refreshToken,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(clientKey, { clientId: 'bench', audience: issuer }),
      }).toString();
      const dpop = await createDpopProof(s.dpopKey, { method: 'POST', url: tokenUrl });
      const t = await timed(() => send(issuer, 'POST', '/token', { 'content-type': 'application/x-www-form-urlencoded', dpop }, form));
      if (t.ok) s.refreshToken = JSON.parse(t.reply.body).refresh_token;
      else if (process.env.BENCH_DEBUG) process.stderr.write(`${t.reply.status} ${t.reply.body}\n`);
      return t;
    };
    return { pid: child.pid as number, sessions, step, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '-');
function row(name: string, s: Stats, target: string): string {
  return `| ${name} | ${s.requests} | ${s.rps.toFixed(0)} | ${f1(s.mean)} | ${f1(s.p50)} | ${f1(s.p95)} | ${f1(s.p99)} | ${s.errors} | ${target} |`;
}

/** Rewrites the guard section of bench/RESULTS.md (same markers as bench/run.ts). */
async function main(): Promise<void> {
  const body = await benchGuard();
  const file = path.join(__dirname, 'RESULTS.md');
  let doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n';
  const section = `<!-- bench:guard -->\n## Access guard\n\nMeasured ${new Date().toISOString().slice(0, 16)}Z.\n\n${body}\n<!-- /bench:guard -->`;
  const re = /<!-- bench:guard -->[\s\S]*?<!-- \/bench:guard -->/;
  doc = re.test(doc) ? doc.replace(re, section) : `${doc.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(file, doc);
  process.stdout.write(`${body}\n`);
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
