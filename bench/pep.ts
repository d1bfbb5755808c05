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
import { runLoad, row, TABLE_HEAD, type LoadRequest, type LoadResult } from './lib/load';
import { startServerProcess } from './lib/server';

/** What the numbers mean, printed after the tables. */
export const PEP_READING =
  'Reading: per request the guard costs one ES256 signature check (the proof; verified access tokens and imported proof keys are cached), a few SHA-256 hashes, a check that the token\'s session is not revoked (cached per session for at most 1 s), and one round trip to the shared state (a Redis MULTI, or one PostgreSQL statement committed without waiting for the WAL flush; in memory for the embedded store). Measured in one process with requests interleaved guard on/off (so machine load hits both alike): in front of a trivial handler the enforcement point adds 0.33 ms at p50; in front of this slot search (PGlite) 0.85 ms at p50. On 2 cores shared by the load generator, the server, PostgreSQL and Redis, every added CPU microsecond shows in the throughput ratio; the aim of 80% is not reached here (about 60% with PostgreSQL + Redis, 73-77% with PGlite); the added p50 of an unloaded request is about 0.7 ms (0.7 ms PostgreSQL + Redis, 0.7 to 1.5 ms PGlite over runs), far inside the seed\'s 75 ms mean.';

const SCHEDULES = 20;
const SLOTS_PER_SCHEDULE = 1000;
const CONNECTIONS = 32;
const ROUNDS = 5;
const ROUND_MS = 4_000;
const WARMUP_MS = 3_000;

/**
 * Issue 6 benchmark: the same authenticated slot search through the full enforcement point
 * (token, DPoP proof with ath and cnf.jkt, jti replay check, per-client rate limit, scopes,
 * identity headers) and with GUARD_ENFORCEMENT=off: two server processes on the same data, 32
 * connections, measured in alternating rounds so both see the same machine load. The guard-on
 * clients are 32 registered institutions; their proofs are signed before the run so the load
 * generator's signing does not count against the guard.
 */
export async function benchPep(): Promise<string> {
  // The embedded store always; PostgreSQL (with Redis when REDIS_URL is set) as well when DATABASE_URL is set.
  const sections = [await benchOn(await prepareStore(false))];
  if (process.env.DATABASE_URL) sections.push(await benchOn(await prepareStore(true)));
  return [...sections, PEP_READING].join('\n\n');
}

async function benchOn({ env, envCopy, store, cleanup }: Awaited<ReturnType<typeof prepareStore>>): Promise<string> {
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-ca-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const common = { DEMO_DATA: 'false', CARD_TRUST_ANCHORS: anchors, RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_IP: '100000' };
  const offServer = await startServerProcess({ ...env, ...common, GUARD_ENFORCEMENT: 'off' });
  const onServer = await startServerProcess({ ...envCopy, ...common, GUARD_ENFORCEMENT: 'on' });
  try {
    const offNext: Next = (_c, n) => ({ path: query(n), headers: { accept: 'application/fhir+json' } });
    const onNext = await authenticatedRequests(onServer.url, ca, 80_000);
    await runLoad({ baseUrl: offServer.url, connections: CONNECTIONS, durationMs: WARMUP_MS, next: offNext });
    await runLoad({ baseUrl: onServer.url, connections: CONNECTIONS, durationMs: WARMUP_MS, next: onNext });
    const off: LoadResult[] = [];
    const on: LoadResult[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      off.push(await runLoad({ baseUrl: offServer.url, connections: CONNECTIONS, durationMs: ROUND_MS, next: offNext, expectStatus: (s) => s === 200 }));
      on.push(await runLoad({ baseUrl: onServer.url, connections: CONNECTIONS, durationMs: ROUND_MS, next: onNext, expectStatus: (s) => s === 200 }));
    }
    // Unloaded latency: one connection, so queueing does not hide or inflate the guard's own cost.
    const offOne: LoadResult[] = [];
    const onOne: LoadResult[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      offOne.push(await runLoad({ baseUrl: offServer.url, connections: 1, durationMs: ROUND_MS / 2, next: offNext, expectStatus: (s) => s === 200 }));
      onOne.push(await runLoad({ baseUrl: onServer.url, connections: 1, durationMs: ROUND_MS / 2, next: onNext, expectStatus: (s) => s === 200 }));
    }
    const a = medianOf(off);
    const b = medianOf(on);
    const a1 = medianOf(offOne);
    const b1 = medianOf(onOne);
    const ratios = on.map((x, i) => x.rps / off[i].rps);
    return [
      `Store: ${store}; ${(SCHEDULES * SLOTS_PER_SCHEDULE).toLocaleString('en')} Slots in ${SCHEDULES} Schedules; query \`Slot?schedule=X&status=free&start=ge..&start=le..&_count=10\` (one day). Two server processes (guard off, guard on) on copies of the same data, ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${ROUND_MS / 1000} s each after a ${WARMUP_MS / 1000} s warm-up; the table shows the median round (requests: sum of all rounds). Machine: ${os.cpus().length} cores, shared with other work (load average ${os.loadavg()[0].toFixed(1)} at the end). Guard on: ${CONNECTIONS} institutions (one token and DPoP key each), a fresh proof per request.`,
      '',
      TABLE_HEAD,
      row('guard off (`GUARD_ENFORCEMENT=off`)', a),
      row('guard on (DPoP token + proof, jti, rate limit, scopes, identity headers)', b),
      row('guard off, 1 connection', a1),
      row('guard on, 1 connection', b1),
      '',
      `Guard on keeps ${(median(ratios) * 100).toFixed(1)}% of the throughput (median of the per-round ratios ${ratios.map((x) => `${(x * 100).toFixed(0)}%`).join(', ')}); at ${CONNECTIONS} connections it adds ${(b.p50 - a.p50).toFixed(2)} ms at p50 and ${(b.p99 - a.p99).toFixed(2)} ms at p99 (queueing included); unloaded (1 connection) ${(b1.p50 - a1.p50).toFixed(2)} ms at p50 and ${(b1.p99 - a1.p99).toFixed(2)} ms at p99.`,
      `Aim: over 80% of the throughput and under 1 ms added at p50 (seed 000 section 8: proxy request mean 75 ms, p99 1 s).`,
    ].join('\n');
  } finally {
    await Promise.all([offServer.stop(), onServer.stop()]);
    await cleanup();
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
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

export async function prepareStore(postgres: boolean): Promise<{ env: Record<string, string>; envCopy: Record<string, string>; store: string; cleanup(): Promise<void> }> {
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
  fs.cpSync(dir, copy, { recursive: true });
  return {
    env: { DATA_DIR: dir, DATABASE_URL: '', REDIS_URL: '' },
    envCopy: { DATA_DIR: copy, DATABASE_URL: '', REDIS_URL: '' },
    store: 'PGlite (embedded)',
    cleanup: async () => {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(copy, { recursive: true, force: true });
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
