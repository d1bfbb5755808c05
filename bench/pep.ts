import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { Resource } from '@medplum/fhirtypes';
import { GuardClient, SoftwareCard, createDpopProof, fetchTransport } from '../src/client';
import { createCardCa, issueCard } from '../src/guard/pki/dev-pki';
import { openDb } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { Repository } from '../src/store/repository';
import type { Caller } from '../src/common/identity';
import { slotSearchStatements } from './lib/search-statements';
import { cpuMeter, loadAverage, pidsNamed } from './lib/cpu';
import { ms, runLoad, type LoadRequest, type LoadResult } from './lib/load';
import { startFloorServer, startServerProcess, type ServerProcess } from './lib/server';

/** What the numbers mean, printed after the tables. */
export const PEP_READING =
  'Reading: per request the guard costs one ES256 signature check of the proof (node:crypto on a key object cached per proof key; verified access tokens are cached), a few SHA-256 hashes, a check that the token\'s session is not revoked (cached per session for at most 1 s), and its share of one round trip to the shared state (one Redis script call for all the requests that asked in one turn of the event loop, or one PostgreSQL statement committed without waiting for the WAL flush; in memory for the embedded store). Searches of one shape asked for together share one statement the same way, and so do the window cache\'s generation reads. The floors are what a server must do for the same answer on this machine one request at a time: the HTTP floor answers the same bytes from a bare `node:http` server; the SQL floor adds the statement Terminus runs for the query, replayed with `pg` (prepared) once per request; the guarded floor adds one ES256 check on a cached key object and one Redis script call per request. The cached guarded floor is the HTTP floor with the ES256 check and the Redis call and no statement at all: what any guarded answer from memory costs. The floors are sent the unguarded request, without the Authorization and DPoP headers (about 1.3 KB) a guarded server parses. A cache hit of Terminus also reads its window\'s stamp from the store, so that no replica answers from a result another replica\'s write made stale (one statement for all the hits of a turn of the event loop). Terminus, sharing statements and script calls between requests, can pass them. Ratios are per round (the scenarios of a round run back to back, their order rotating), then the median. CPU per request is read from /proc for the server process, all PostgreSQL processes and Redis over each round; the load generator runs on the same 2 cores.';

const SCHEDULES = 20;
const SLOTS_PER_SCHEDULE = 1000;
const CONNECTIONS = 32;
const ROUNDS = 5;
const ROUND_MS = 4_000;
const WARMUP_MS = 3_000;

interface Scenario {
  name: string;
  server: ServerProcess;
  next: Next;
  /** The floor this scenario is compared with. */
  floor?: string;
}

interface Measured {
  runs: LoadResult[];
  cpu: Record<string, number>[];
}

/**
 * Guarded slot search benchmark: the authenticated slot search through the full enforcement
 * point (token, DPoP proof with ath and cnf.jkt, jti replay check, per-client rate limit, scopes,
 * identity headers), with GUARD_ENFORCEMENT=off, and with the calendar window cache; with
 * PostgreSQL also the floors of the same run (floor-server.ts). Every server in its own process on
 * copies of the same data, 32 connections, measured in rotating rounds so all see the same machine
 * load. The guard-on clients are 32 registered institutions; their proofs are signed before the
 * run so the load generator's signing does not count against the guard.
 */
export async function benchPep(): Promise<string> {
  // The embedded store always; PostgreSQL (with Redis when REDIS_URL is set) as well when DATABASE_URL is set.
  const sections = [await benchOn(await prepareStore(false))];
  if (process.env.DATABASE_URL) sections.push(await benchOn(await prepareStore(true)));
  return [...sections, PEP_READING].join('\n\n');
}

async function benchOn({ env, envCopy, envCopy2, store, postgres, cleanup }: Awaited<ReturnType<typeof prepareStore>>): Promise<string> {
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-ca-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const loadAtStart = loadAverage();
  const common = { DEMO_DATA: 'false', CARD_TRUST_ANCHORS: anchors, RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_IP: '100000' };
  const servers: ServerProcess[] = [];
  const start = async (p: Promise<ServerProcess>) => {
    const s = await p;
    servers.push(s);
    return s;
  };
  try {
    const off = await start(startServerProcess({ ...env, ...common, GUARD_ENFORCEMENT: 'off', SEARCH_CACHE_ENTRIES: '0' }));
    const on = await start(startServerProcess({ ...envCopy, ...common, GUARD_ENFORCEMENT: 'on', SEARCH_CACHE_ENTRIES: '0' }));
    const cached = await start(startServerProcess({ ...envCopy2, ...common, GUARD_ENFORCEMENT: 'on' }));
    const offNext: Next = (_c, n) => ({ path: query(n), headers: { accept: 'application/fhir+json' } });
    const scenarios: Scenario[] = [
      { name: 'guard off (`GUARD_ENFORCEMENT=off`), no cache', server: off, next: offNext, floor: 'SQL floor' },
      { name: 'guard on (DPoP token + proof, jti, rate limit, scopes, identity headers), no cache', server: on, next: await authenticatedRequests(on.url, ca, 120_000), floor: 'guarded floor' },
      { name: 'guard on, calendar window cache (`SEARCH_CACHE_ENTRIES` default)', server: cached, next: await authenticatedRequests(cached.url, ca, 160_000), floor: postgres ? 'cached guarded floor' : undefined },
    ];
    if (postgres) {
      const answers = await floorAnswers(off.url);
      const dbEnv = { DATABASE_URL: env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL ?? '' };
      const http = await start(startFloorServer({ answers: withoutSql(answers) }));
      const sql = await start(startFloorServer({ answers }, dbEnv));
      const viewer = { institution: '1-BENCH-0', isOwner: false };
      const guardedAnswers = await floorAnswers(off.url, viewer);
      const guarded = await start(startFloorServer({ answers: guardedAnswers, verifies: 1, redis: !!process.env.REDIS_URL }, dbEnv));
      const hit = await start(startFloorServer({ answers: withoutSql(guardedAnswers), verifies: 1, redis: !!process.env.REDIS_URL }, dbEnv));
      scenarios.push(
        { name: 'HTTP floor (`node:http`, the same bytes)', server: http, next: offNext },
        { name: 'SQL floor (HTTP floor + the search statement with `pg`)', server: sql, next: offNext },
        { name: `guarded floor (SQL floor + one ES256 check${process.env.REDIS_URL ? ' + one Redis script call' : ''})`, server: guarded, next: offNext },
        { name: `cached guarded floor (HTTP floor + one ES256 check${process.env.REDIS_URL ? ' + one Redis script call' : ''}, no statement)`, server: hit, next: offNext },
      );
    }
    const measured = await rotatingRounds(scenarios, CONNECTIONS, ROUND_MS, postgres);
    const floorOf = (name: string | undefined) => scenarios.findIndex((x) => name !== undefined && x.name.startsWith(name));
    // Unloaded latency: one connection, so queueing does not hide or inflate the guard's own cost.
    // With PostgreSQL the floors too: what one ES256 check and one Redis call add at p50 by themselves.
    const unloaded = postgres ? [0, 1, floorOf('SQL floor'), floorOf('guarded floor')] : [0, 1];
    const one = await rotatingRounds(unloaded.map((i) => scenarios[i]), 1, ROUND_MS / 2, postgres);
    const rows = scenarios.map((sc, i) => {
      const m = medianOf(measured[i].runs);
      const f = floorOf(sc.floor);
      const ratio = f >= 0 ? ` ${median(measured[i].runs.map((r, k) => r.rps / measured[f].runs[k].rps)).toFixed(2)} of the ${sc.floor}` : ' –';
      return `| ${sc.name} | ${m.requests} | ${m.rps.toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors} | ${cpuPerRequest(measured[i])} |${ratio} |`;
    });
    const keeps = median(measured[1].runs.map((r, k) => r.rps / measured[0].runs[k].rps));
    const cachedKeeps = median(measured[2].runs.map((r, k) => r.rps / measured[1].runs[k].rps));
    const a1 = medianOf(one[0].runs);
    const b1 = medianOf(one[1].runs);
    const floorsAdd = postgres ? unloadedFloors(medianOf(one[2].runs), medianOf(one[3].runs)) : '';
    return [
      `Store: ${store}; ${(SCHEDULES * SLOTS_PER_SCHEDULE).toLocaleString('en')} Slots in ${SCHEDULES} Schedules; query \`Slot?schedule=X&status=free&start=ge..&start=le..&_count=10\` (one day; 560 distinct queries). Each server in its own process on a copy of the same data, default log level; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per scenario after a ${WARMUP_MS / 1000} s warm-up, the scenarios of a round back to back in rotating order; the table shows the median round (requests: sum of all rounds). Machine: ${os.cpus().length} cores, load average (1 / 5 / 15 min) ${loadAtStart} at the start, ${loadAverage()} at the end. Guard on: ${CONNECTIONS} institutions (one token and DPoP key each), a fresh proof per request.`,
      '',
      '| scenario | requests | req/s | p50 ms | p99 ms | errors | CPU ms per request | ratio (median of rounds) |',
      '|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `Guard on keeps ${(keeps * 100).toFixed(0)}% of the unguarded throughput (per round: ${measured[1].runs.map((r, k) => `${((r.rps / measured[0].runs[k].rps) * 100).toFixed(0)}%`).join(', ')}); the window cache multiplies the guarded throughput by ${cachedKeeps.toFixed(2)}. Unloaded (1 connection, ${ROUNDS} rounds): guard off p50 ${ms(a1.p50)} ms, on ${ms(b1.p50)} ms, so the guard adds ${(b1.p50 - a1.p50).toFixed(2)} ms at p50 and ${(b1.p99 - a1.p99).toFixed(2)} ms at p99.${floorsAdd}`,
      'Aims (docs/requirements.md#performance-aims): without the cache at least 0.6 of the floor, the guard keeping at least 0.85 of the unguarded throughput and adding under 0.3 ms at p50; with the cache at least 2,000 req/s on a quiet 2-core machine.',
    ].join('\n');
  } finally {
    await Promise.all(servers.map((x) => x.stop()));
    await cleanup();
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
}

/** What one ES256 check and one Redis call add to a request by themselves: the guarded floor's p50 over the SQL floor's, one connection. */
function unloadedFloors(sql: LoadResult, guarded: LoadResult): string {
  return ` The floors unloaded: SQL floor p50 ${ms(sql.p50)} ms, guarded floor ${ms(guarded.p50)} ms, so one ES256 check and one Redis call add ${(guarded.p50 - sql.p50).toFixed(2)} ms at p50 by themselves.`;
}

/**
 * Rounds of every scenario back to back, the order rotating each round, after one warm-up each;
 * CPU of the scenario's server (and PostgreSQL, Redis) read around each run.
 */
export async function rotatingRounds(scenarios: Scenario[], connections: number, roundMs: number, postgres: boolean): Promise<Measured[]> {
  for (const sc of scenarios) await runLoad({ baseUrl: sc.server.url, connections, durationMs: Math.min(WARMUP_MS, roundMs), next: sc.next });
  const out: Measured[] = scenarios.map(() => ({ runs: [], cpu: [] }));
  for (let r = 0; r < ROUNDS; r++) {
    for (let j = 0; j < scenarios.length; j++) {
      const i = (j + r) % scenarios.length;
      const sc = scenarios[i];
      const meter = cpuMeter({
        server: () => [sc.server.pid],
        ...(postgres ? { postgres: () => pidsNamed('postgres') } : {}),
        ...(process.env.REDIS_URL && postgres ? { redis: () => pidsNamed('redis-server') } : {}),
      });
      const run = await runLoad({ baseUrl: sc.server.url, connections, durationMs: roundMs, next: sc.next, expectStatus: (s) => s === 200 });
      out[i].runs.push(run);
      out[i].cpu.push(Object.fromEntries(Object.entries(meter.stop()).map(([k, v]) => [k, (v * 1000) / Math.max(1, run.requests)])));
    }
  }
  return out;
}

function cpuPerRequest(m: Measured): string {
  const names = Object.keys(m.cpu[0] ?? {});
  return names.map((n) => `${n} ${median(m.cpu.map((c) => c[n])).toFixed(2)}`).join(', ');
}

/** The bytes and statements of every query the load sends, as the guard-off server answers and runs them. */
async function floorAnswers(baseUrl: string, scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Promise<Record<string, { body: string; contentType: string; sql: { text: string; values: unknown[] }[] }>> {
  const answers: Record<string, { body: string; contentType: string; sql: { text: string; values: unknown[] }[] }> = {};
  for (let n = 0; n < SCHEDULES * 28; n++) {
    const p = query(n);
    if (answers[p]) continue;
    const res = await fetch(`${baseUrl}${p}`, { headers: { accept: 'application/fhir+json' } });
    const sql = await slotSearchStatements([...new URL(p, baseUrl).searchParams.entries()], { scope, baseUrl: `${baseUrl}/fhir` });
    answers[p] = { body: await res.text(), contentType: res.headers.get('content-type') ?? 'application/fhir+json', sql };
  }
  return answers;
}

function withoutSql<T extends { sql?: unknown }>(answers: Record<string, T>): Record<string, Omit<T, 'sql'>> {
  return Object.fromEntries(Object.entries(answers).map(([k, { sql: _sql, ...rest }]) => [k, rest]));
}

export type Next = (client: number, n: number) => LoadRequest | Promise<LoadRequest>;

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

/** Per metric the median over the rounds; requests and errors summed. */
export function medianOf(rs: LoadResult[]): LoadResult {
  return {
    requests: rs.reduce((s, r) => s + r.requests, 0),
    durationS: rs.reduce((s, r) => s + r.durationS, 0),
    rps: median(rs.map((r) => r.rps)),
    p50: median(rs.map((r) => r.p50)),
    p95: median(rs.map((r) => r.p95)),
    p99: median(rs.map((r) => r.p99)),
    mean: median(rs.map((r) => r.mean)),
    errors: rs.reduce((s, r) => s + r.errors, 0),
    statuses: {},
  };
}

export function query(n: number): string {
  const schedule = (n % SCHEDULES) + 1;
  const day = new Date(Date.UTC(2030, 0, 1 + (n % 28))).toISOString().slice(0, 10);
  return `/fhir/Slot?schedule=Schedule/bench-s-${schedule}&status=free&start=ge${day}T00:00:00Z&start=le${day}T23:59:59Z&_count=10`;
}

/** 32 institutions log in through the real guard; each gets a stack of proofs signed in advance. */
export async function authenticatedRequests(url: string, ca: ReturnType<typeof createCardCa>, expected: number): Promise<Next> {
  const publicUrl = url;
  const clients: { token: string; proofs: { path: string; proof: string }[]; next: number; client: GuardClient }[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const c = issueCard(ca, { telematikId: `1-BENCH-${i}`, professionOid: '1.2.276.0.76.4.50', commonName: `Bench ${i}`, organizationName: `Bench ${i}` });
    const client = new GuardClient({ server: publicUrl, transport: fetchTransport(), retries: 2 });
    const tokens = await client.login(new SoftwareCard(c.certPem, c.keyPem));
    clients.push({ token: tokens.accessToken, proofs: [], next: 0, client });
  }
  const perClient = Math.ceil(expected / CONNECTIONS);
  const iat = Math.floor(Date.now() / 1000);
  for (const c of clients) {
    for (let n = 0; n < perClient; n++) {
      const p = query(n * CONNECTIONS + clients.indexOf(c));
      c.proofs.push({ path: p, proof: await createDpopProof(c.client.dpopKey!, { method: 'GET', url: `${publicUrl}${p.split('?')[0]}`, accessToken: c.token, iat }) });
    }
  }
  return async (id) => {
    const c = clients[id];
    const pre = c.proofs[c.next++];
    const p = pre ?? { path: query(c.next), proof: await c.client.proof('GET', `${publicUrl}${query(c.next).split('?')[0]}`) };
    return { path: p.path, headers: { accept: 'application/fhir+json', authorization: `DPoP ${c.token}`, dpop: p.proof } };
  };
}

export async function prepareStore(
  postgres: boolean,
): Promise<{ env: Record<string, string>; envCopy: Record<string, string>; envCopy2: Record<string, string>; postgres: boolean; store: string; cleanup(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (postgres && base) {
    const admin = new Pool({ connectionString: base, max: 1 });
    await admin.query('DROP DATABASE IF EXISTS terminus_bench_pep WITH (FORCE)');
    await admin.query('CREATE DATABASE terminus_bench_pep');
    await admin.end();
    const url = new URL(base);
    url.pathname = '/terminus_bench_pep';
    await load(url.toString(), undefined);
    const env = { DATABASE_URL: url.toString(), ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}) };
    return {
      env,
      envCopy: env,
      envCopy2: env,
      postgres: true,
      store: `PostgreSQL (local)${process.env.REDIS_URL ? ' + Redis (replay cache, rate limit)' : ''}`,
      cleanup: async () => {
        const a = new Pool({ connectionString: base, max: 1 });
        await a.query('DROP DATABASE IF EXISTS terminus_bench_pep WITH (FORCE)').catch(() => undefined);
        await a.end();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-pep-'));
  await load(undefined, dir);
  // PGlite belongs to one process: the second server gets a copy.
  const copy = `${dir}-copy`;
  const copy2 = `${dir}-copy2`;
  fs.cpSync(dir, copy, { recursive: true });
  fs.cpSync(dir, copy2, { recursive: true });
  return {
    env: { DATA_DIR: dir, DATABASE_URL: '', REDIS_URL: '' },
    envCopy: { DATA_DIR: copy, DATABASE_URL: '', REDIS_URL: '' },
    envCopy2: { DATA_DIR: copy2, DATABASE_URL: '', REDIS_URL: '' },
    postgres: false,
    store: 'PGlite (embedded)',
    cleanup: async () => {
      for (const d of [dir, copy, copy2]) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}

async function load(databaseUrl: string | undefined, dataDir: string | undefined): Promise<void> {
  const db = await openDb({ databaseUrl, dataDir });
  await migrate(db);
  const repo = new Repository(db, 'http://127.0.0.1/fhir');
  const batch: Resource[] = [];
  for (let s = 1; s <= SCHEDULES; s++) {
    batch.push({ resourceType: 'Schedule', id: `bench-s-${s}`, active: true, actor: [{ reference: `Practitioner/bench-p-${s}`, display: `Dr. Bench ${s}` }] });
    for (let i = 0; i < SLOTS_PER_SCHEDULE; i++) {
      const start = Date.UTC(2030, 0, 1 + Math.floor(i / 32), 7) + (i % 32) * 15 * 60000;
      batch.push({ resourceType: 'Slot', id: `bench-${s}-${i}`, schedule: { reference: `Schedule/bench-s-${s}` }, status: i % 5 === 0 ? 'busy' : 'free', start: new Date(start).toISOString(), end: new Date(start + 15 * 60000).toISOString() });
    }
    if (batch.length >= 5000) await repo.bulkLoad(batch.splice(0));
  }
  await repo.bulkLoad(batch.splice(0));
  await db.query('ANALYZE');
  await db.close();
}
