/**
 * The volume curve: guarded slot searches, `$book`, cancel, a subscription fan-out and a
 * cache-cold search against realistic calendars (bench/volume/generate.ts) loaded into
 * PostgreSQL at growing sizes, each size in a database of its own served by one guarded server
 * process. Aim (docs/requirements.md#performance-aims: a practice's calendar grows for years, the
 * answer times ISiK sets must hold at every size): p50 and p99 at the largest size within 1.5 x of
 * the smallest, throughput at least 0.8 x.
 *
 *   BENCH_CURVE_SIZES=10000,100000,1000000 npm run bench curve
 *
 * The embedded store (PGlite in a DATA_DIR, the default of a trial) runs the same scenarios at
 * BENCH_CURVE_PGLITE_SIZES (default 10000,100000; empty: none), to find the size up to which it
 * stays usable.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { createCardCa } from '../src/guard/pki/dev-pki';
import { slotSearchStatements } from './lib/search-statements';
import { openDb, openPglite, type Db } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { Repository } from '../src/store/repository';
import { prng } from '../test/fuzz/cases';
import { guardedLoad, logins } from './curve/guarded';
import { loadAverage } from './lib/cpu';
import { ms, runLoad, type LoadResult } from './lib/load';
import { startServerProcess, type ServerProcess } from './lib/server';
import { startReceivers } from './lib/subscription-receivers';
import { medianOf } from './pep';
import { retireFreeSlots } from '../src/booking';
import { bytesOfSlots } from './volume/bytes';
import { DEFAULT_VOLUME, loadVolume } from './volume/generate';

const SIZES = (process.env.BENCH_CURVE_SIZES ?? '10000,100000').split(',').filter(Boolean).map(Number);
const PGLITE_SIZES = (process.env.BENCH_CURVE_PGLITE_SIZES ?? '10000,100000').split(',').filter(Boolean).map(Number);
const CONNECTIONS = 16;
const ROUNDS = 3;
const ROUND_MS = 3_000;
const WARMUP_MS = 2_000;
const COLD = 20;
const FANOUT = 50;
const FANOUT_EVENTS = 3;
/** The institution whose 16 workers book and cancel; the searches come from 16 institutions of their own. */
const BOOKER = '1-BENCH-CURVE';
const searcher = (i: number) => `1-BENCH-CURVE-S${i}`;
const FHIR_JSON = 'application/fhir+json';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';

interface Pair {
  schedule: string;
  day: string;
  service: string;
}

interface SearchShape {
  name: string;
  path: (p: Pair) => string;
}

const window = (p: Pair) => `status=free&start=ge${p.day}T00:00:00Z&start=le${p.day}T23:59:59Z&_count=10`;
const SEARCHES: SearchShape[] = [
  { name: 'search by schedule and day (`Slot?schedule=…&status=free&start=ge…&start=le…&_count=10`)', path: (p) => `/fhir/Slot?schedule=Schedule/${p.schedule}&${window(p)}` },
  { name: 'search by the schedule\'s practitioner (`Slot?schedule.actor=Practitioner/…&status=free&start=…`)', path: (p) => `/fhir/Slot?schedule.actor=Practitioner/${p.schedule.replace('vol-schedule-', 'vol-practitioner-')}&${window(p)}` },
  // ISiK allows `status` on Slot only beside `schedule` (a 422 otherwise): free and busy slots alike.
  { name: 'search by service type and day (`Slot?service-type=…|code&start=…`)', path: (p) => `/fhir/Slot?service-type=${encodeURIComponent(`http://terminology.hl7.org/CodeSystem/service-type|${p.service}`)}&start=ge${p.day}T00:00:00Z&start=le${p.day}T23:59:59Z&_count=10` },
];
const BOOK = '`$book` of a free slot (an ISiKTermin proposal naming it)';
const CANCEL = 'cancel (`PATCH Appointment/…` status cancelled, JSON Patch)';

interface SizeResult {
  store: 'PostgreSQL' | 'PGlite';
  slots: number;
  appointments: number;
  loadS: number;
  vacuumS: number;
  runs: Record<string, LoadResult>;
  cold: number[];
  fanout: number[];
  plans?: { name: string; query: string; plans: string[] }[];
  /** At the largest size: bytes per stored slot and the retirement job's runs. */
  largest?: { bytesPerSlot: number; retirements: Retirement[] };
}

/** One run of the retirement job: the free slots it removed and how long it took. */
interface Retirement {
  what: string;
  slots: number;
  seconds: number;
}

export async function benchCurve(): Promise<string> {
  const base = process.env.DATABASE_URL;
  if (!base) return 'Needs DATABASE_URL (PostgreSQL): the curve runs at PostgreSQL sizes.';
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-curve-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const loadAtStart = loadAverage();
  const results: SizeResult[] = [];
  try {
    for (const [i, slots] of SIZES.entries()) results.push(await oneSize(await postgresStore(base, slots), slots, i === SIZES.length - 1, ca, anchors));
    for (const slots of PGLITE_SIZES) results.push(await oneSize(await pgliteStore(slots), slots, false, ca, anchors));
  } finally {
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
  return report(results, loadAtStart);
}

/** A store of one size: how the server is pointed at it, and SQL on it while no server holds it. */
interface CurveStore {
  kind: 'PostgreSQL' | 'PGlite';
  serverEnv: Record<string, string>;
  /** Opens the store in this process (PGlite: only while no server runs on it). */
  open(): Promise<Db>;
  /** SQL of the bench itself (sampling, VACUUM, EXPLAIN), with the server's session settings. */
  query<T extends Record<string, unknown>>(sql: string, values?: unknown[]): Promise<T[]>;
  /** Frees what `query` holds, before the server starts (PGlite has one user). */
  release(): Promise<void>;
  drop(): Promise<void>;
}

async function postgresStore(base: string, slots: number): Promise<CurveStore> {
  const name = `terminus_bench_curve_${slots}`;
  const admin = new Pool({ connectionString: base, max: 1 });
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const databaseUrl = url.toString();
  // The server's own session settings (src/store/db/pg-pool.ts), so the plans explained here are the ones it runs.
  const pool = new Pool({ connectionString: databaseUrl, max: 2, options: '-c max_parallel_workers_per_gather=0 -c jit=off' });
  return {
    kind: 'PostgreSQL',
    serverEnv: { DATABASE_URL: databaseUrl, ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}) },
    open: () => openDb({ databaseUrl, poolSize: 4 }),
    query: async (sql, values) => (await pool.query(sql, values)).rows,
    release: async () => undefined,
    drop: async () => {
      await pool.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    },
  };
}

async function pgliteStore(slots: number): Promise<CurveStore> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `terminus-bench-curve-pglite-${slots}-`));
  let db: Db | undefined;
  return {
    kind: 'PGlite',
    // Empty, not left out: the server's environment starts from the bench's own, which names the PostgreSQL store.
    serverEnv: { DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', DATABASE_READ_URL: '' },
    open: () => openPglite(dataDir),
    query: async (sql, values) => {
      db ??= await openPglite(dataDir);
      return (await db.query(sql, values)).rows as never;
    },
    release: async () => {
      await db?.close();
      db = undefined;
    },
    drop: async () => {
      await db?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function oneSize(store: CurveStore, slots: number, largest: boolean, ca: ReturnType<typeof createCardCa>, anchors: string): Promise<SizeResult> {
  let server: ServerProcess | undefined;
  try {
    process.stdout.write(`  curve: loading ${slots} slots into ${store.kind}\n`);
    const db = await store.open();
    let volume;
    try {
      await migrate(db);
      const repo = new Repository(db, 'http://127.0.0.1/fhir');
      let shown = 0;
      volume = await loadVolume(repo, { ...DEFAULT_VOLUME, slots, patients: Math.min(DEFAULT_VOLUME.patients, Math.max(1000, Math.floor(slots / 10))) }, {
        parallel: store.kind === 'PGlite' ? 1 : 2,
        progress: (n) => {
          if (n - shown >= 1_000_000) {
            shown = n;
            process.stdout.write(`  ${n} slots\n`);
          }
        },
      });
    } finally {
      await db.close();
    }
    // VACUUM as well as ANALYZE: the state autovacuum leaves a store in (visibility map set, so
    // index-only scans skip the heap); without it autovacuum would start on the fresh tables
    // in the middle of the measurements.
    const v0 = performance.now();
    await store.query('VACUUM (ANALYZE)');
    const vacuumS = (performance.now() - v0) / 1000;
    const { pairs, cold, free } = await sample(store, slots);
    await store.release();

    server = await startServerProcess({
      ...store.serverEnv,
      DEMO_DATA: 'false',
      CARD_TRUST_ANCHORS: anchors,
      GUARD_ENFORCEMENT: 'on',
      RATE_LIMIT_FHIR_PER_CLIENT: '100000000',
      RATE_LIMIT_PER_IP: '100000',
      // Without the calendar window cache every search reaches the store, whose growth is measured.
      SEARCH_CACHE_ENTRIES: '0',
    });
    const searchers = await logins(server.url, ca, CONNECTIONS, searcher);
    const bookers = await logins(server.url, ca, CONNECTIONS, () => BOOKER);

    // Cache-cold: the first request of each of COLD query shapes after start (schedules and days
    // no request of this run has asked for), one at a time, before any load.
    const coldMs: number[] = [];
    let k = 0;
    const coldCalls = guardedLoad(server.url, searchers, () => (k < cold.length ? { method: 'GET', path: SEARCHES[0].path(cold[k++]) } : undefined));
    for (const _window of cold) {
      const r = await runLoad({ baseUrl: server.url, connections: 1, durationMs: 60_000, maxRequests: 1, next: () => coldCalls.next(0), expectStatus: (s) => s === 200 });
      if (r.errors) throw new Error(`cold search answered ${JSON.stringify(r.statuses)}`);
      coldMs.push(r.p50);
    }

    const counters = SEARCHES.map(() => 0);
    const scenarios: { name: string; load: ReturnType<typeof guardedLoad>; expect: number; perRun: number; bounded?: () => number }[] = SEARCHES.map((shape, s) => ({
      name: shape.name,
      load: guardedLoad(server!.url, searchers, () => ({ method: 'GET', path: shape.path(pairs[counters[s]++ % pairs.length]) })),
      expect: 200,
      perRun: 1500,
    }));
    let booked = 0;
    const patients = Math.min(DEFAULT_VOLUME.patients, Math.max(1000, Math.floor(slots / 10)));
    const book = guardedLoad(server.url, bookers, () => {
      const s = free[booked];
      if (!s) return undefined;
      booked++;
      return { method: 'POST', path: '/fhir/Appointment/$book', contentType: FHIR_JSON, body: proposal(s, `vol-patient-${(booked * 7919) % patients}`) };
    });
    scenarios.push({ name: BOOK, load: book, expect: 201, perRun: 600, bounded: () => book.queued() + (free.length - booked) });
    const toCancel: string[] = [];
    const handedOut = new Set<string>();
    let fanoutAppointment: string | undefined;
    const cancel = guardedLoad(server.url, bookers, () => {
      const id = toCancel.shift();
      return id ? { method: 'PATCH', path: `/fhir/Appointment/${id}`, contentType: 'application/json-patch+json', body: JSON.stringify([{ op: 'replace', path: '/status', value: 'cancelled' }]) } : undefined;
    });
    // The appointments this run booked, not handed to the cancel load yet (one kept for the fan-out):
    // found through the API by the slots booked (the embedded store has one user, the server).
    // Every slot a booking was signed for is asked for until its appointment is found: a signed
    // booking a run did not send goes out in a later one.
    const slotsFound = new Set<string>();
    const refill = async () => {
      const slotIds = free
        .slice(0, booked)
        .filter((f) => !slotsFound.has(`Slot/${f.id}`))
        .map((f) => `Slot/${f.id}`);
      for (let i = 0; i < slotIds.length; i += 100) {
        const res = await bookers[0].client.request('GET', `${server!.url}/fhir/Appointment?status=booked&slot=${slotIds.slice(i, i + 100).join(',')}&_count=1000&_elements=id,slot`, { headers: { accept: FHIR_JSON } });
        if (res.status !== 200) throw new Error(`Appointment search: ${res.status} ${res.text.slice(0, 300)}`);
        for (const e of (res.json as { entry?: { resource: { id: string; slot?: { reference?: string }[] } }[] }).entry ?? []) {
          for (const s of e.resource.slot ?? []) if (s.reference) slotsFound.add(s.reference);
          const id = e.resource.id;
          if (handedOut.has(id)) continue;
          handedOut.add(id);
          if (!fanoutAppointment) fanoutAppointment = id;
          else toCancel.push(id);
        }
      }
    };
    scenarios.push({ name: CANCEL, load: cancel, expect: 200, perRun: 600, bounded: () => cancel.queued() + toCancel.length });

    const runs: Record<string, LoadResult[]> = Object.fromEntries(scenarios.map((s) => [s.name, []]));
    for (let round = -1; round < ROUNDS; round++) {
      // Round -1 warms up (every scenario once); then the scenarios back to back, a booking before the cancels it feeds.
      for (const sc of scenarios) {
        if (sc.load === cancel) await refill();
        await sc.load.presign(Math.ceil(sc.perRun / CONNECTIONS));
        const r = await runLoad({
          baseUrl: server.url,
          connections: CONNECTIONS,
          durationMs: round < 0 ? WARMUP_MS : ROUND_MS,
          maxRequests: sc.bounded?.(),
          next: (c) => sc.load.next(c),
          expectStatus: (st) => st === sc.expect,
        });
        if (r.errors) process.stdout.write(`  ${sc.name}: ${r.errors} errors ${JSON.stringify(r.statuses)}; the first: ${r.firstError}\n`);
        if (round >= 0) runs[sc.name].push(r);
      }
    }
    const fanout = fanoutAppointment ? await fanOut(server.url, bookers[0].client, fanoutAppointment) : [];
    await server.stop();
    server = undefined;
    const plans = largest ? await explain(store, pairs[0], searcher(0)) : undefined;
    const atLargest = largest ? { bytesPerSlot: await bytesOfSlots(store.query, 'public', volume.slots, volume.slots >= 1_000_000 ? 1 : undefined), retirements: await retire(store) } : undefined;
    return {
      store: store.kind,
      slots: volume.slots,
      appointments: volume.appointments,
      loadS: volume.seconds,
      vacuumS,
      runs: Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, { ...medianOf(v), statuses: merged(v) }])),
      cold: coldMs,
      fanout,
      plans,
      largest: atLargest,
    };
  } finally {
    await server?.stop();
    await store.drop();
  }
}

interface FreeSlot {
  id: string;
  start: string;
  end: string;
  serviceType: unknown;
  specialty: unknown;
}

/**
 * Inputs that hit stored data: slots drawn from the whole store (TABLESAMPLE, repeatable), their
 * schedules, days and services as search windows, COLD of those windows kept apart for the cold
 * search, and the free ones, shuffled, for `$book`.
 */
async function sample(store: CurveStore, slots: number): Promise<{ pairs: Pair[]; cold: Pair[]; free: FreeSlot[] }> {
  const percent = Math.min(100, (100 * 40_000) / (slots * 1.5));
  const rows = await store.query<{ id: string; schedule: string; start: string; end: string; status: string; serviceType: unknown; specialty: unknown }>(
    `SELECT id, content->'schedule'->>'reference' AS schedule, content->>'start' AS start, content->>'end' AS end, content->>'status' AS status,
            content->'serviceType' AS "serviceType", content->'specialty' AS specialty
       FROM resource TABLESAMPLE SYSTEM (${percent}) REPEATABLE (7) WHERE resource_type = 'Slot'`,
  );
  const random = prng(7);
  const shuffle = <T>(xs: T[]): T[] => {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [xs[i], xs[j]] = [xs[j], xs[i]];
    }
    return xs;
  };
  const byKey = new Map<string, Pair>();
  for (const r of rows) {
    if (r.status !== 'free') continue;
    const p = { schedule: r.schedule.slice('Schedule/'.length), day: r.start.slice(0, 10), service: (r.serviceType as { coding: { code: string }[] }[])[0].coding[0].code };
    byKey.set(`${p.schedule}|${p.day}`, p);
  }
  const keys = shuffle([...byKey.values()]);
  const cold = keys.slice(0, COLD);
  const pairs = keys.slice(COLD, COLD + 2000);
  if (pairs.length < 50) throw new Error(`too few search windows sampled (${pairs.length})`);
  const free = shuffle(rows.filter((r) => r.status === 'free').map((r) => ({ id: r.id, start: r.start, end: r.end, serviceType: r.serviceType, specialty: r.specialty })));
  return { pairs, cold, free };
}

function proposal(s: FreeSlot, patient: string): string {
  return JSON.stringify({
    resourceType: 'Appointment',
    meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKTermin'] },
    status: 'proposed',
    start: s.start,
    end: s.end,
    serviceType: s.serviceType,
    specialty: s.specialty,
    slot: [{ reference: `Slot/${s.id}` }],
    participant: [{ actor: { reference: `Patient/${patient}` }, status: 'accepted' }],
  });
}

/**
 * Fan-out: FANOUT rest-hook subscriptions of the booking institution on appointment-update (each
 * receiver on a port of its own), then FANOUT_EVENTS changes of one of its appointments; per event
 * the time from sending the change until the last receiver has its notification.
 */
async function fanOut(url: string, client: import('../src/client').GuardClient, appointment: string): Promise<number[]> {
  const receivers = await startReceivers(FANOUT);
  try {
    for (const r of receivers.logs) {
      const res = await client.request('POST', `${url}/fhir/Subscription`, {
        headers: { 'content-type': FHIR_JSON, accept: FHIR_JSON },
        body: JSON.stringify({
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'benchmark',
          criteria: 'https://gematik.de/fhir/isik/SubscriptionTopic/appointment-update',
          channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${r.port}/notify`, payload: FHIR_JSON, _payload: { extension: [{ url: `${BP}/backport-payload-content`, valueCode: 'id-only' }] } },
        }),
      });
      if (res.status !== 201) throw new Error(`Subscription: ${res.status} ${res.text.slice(0, 300)}`);
    }
    await until(async () => {
      const res = await client.request('GET', `${url}/fhir/Subscription?status=active&_summary=count`, { headers: { accept: FHIR_JSON } });
      return (res.json as { total?: number }).total === FANOUT;
    }, 'subscriptions active');
    const out: number[] = [];
    for (let n = 1; n <= FANOUT_EVENTS; n++) {
      const t0 = performance.now();
      const res = await client.request('PATCH', `${url}/fhir/Appointment/${appointment}`, {
        headers: { 'content-type': 'application/json-patch+json', accept: FHIR_JSON },
        body: JSON.stringify([{ op: 'add', path: '/comment', value: `Änderung ${n}` }]),
      });
      if (res.status !== 200) throw new Error(`PATCH: ${res.status} ${res.text.slice(0, 300)}`);
      await until(async () => receivers.logs.every((r) => r.arrivals.has(n)), `event ${n}`, 2);
      out.push(Math.max(...receivers.logs.map((r) => r.arrivals.get(n)!)) - t0);
    }
    return out;
  } finally {
    await receivers.stop();
  }
}

async function until(done: () => Promise<boolean>, what: string, everyMs = 50): Promise<void> {
  const end = Date.now() + 60_000;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * `EXPLAIN (ANALYZE, BUFFERS)` of the statements each search scenario sends for one of its windows,
 * as a caller of `institution` (the guard's scope): the store's own SQL builder run against a Db
 * that records what it is asked, then each statement explained on the bench database.
 */
/**
 * The retirement job (SLOT_RETENTION_DAYS) on the loaded store: first the free slots of the volume's
 * first day, what the daily job removes once the store is in step; then the rest of that week, a
 * job catching up after a week without a run.
 */
async function retire(store: CurveStore): Promise<Retirement[]> {
  const db = await store.open();
  try {
    const repo = new Repository(db, 'http://127.0.0.1/fhir');
    const out: Retirement[] = [];
    for (const [what, days] of [['a day (the daily run)', 1], ['the six days after it (a week\'s catch-up)', 7]] as const) {
      const t0 = performance.now();
      const slots = await retireFreeSlots(repo, new Date(DEFAULT_VOLUME.start.getTime() + days * 86_400_000));
      out.push({ what, slots, seconds: (performance.now() - t0) / 1000 });
    }
    return out;
  } finally {
    await db.close();
  }
}

async function explain(store: CurveStore, pair: Pair, institution: string): Promise<{ name: string; query: string; plans: string[] }[]> {
  const out = [];
  for (const shape of SEARCHES) {
    const p = shape.path(pair);
    const u = new URL(p, 'http://127.0.0.1');
    const sql = await slotSearchStatements([...u.searchParams.entries()], { scope: { institution, isOwner: false }, baseUrl: 'http://127.0.0.1/fhir' });
    const plans: string[] = [];
    for (const s of sql) {
      const rows = await store.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${s.text}`, s.values);
      plans.push(`${s.text.trim()}\n-- values: ${JSON.stringify(s.values)}\n\n${rows.map((r) => r['QUERY PLAN']).join('\n')}`);
    }
    out.push({ name: shape.name, query: decodeURIComponent(p), plans });
  }
  return out;
}

function merged(runs: LoadResult[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of runs) for (const [k, n] of Object.entries(r.statuses)) out[Number(k)] = (out[Number(k)] ?? 0) + n;
  return out;
}

/** Answers of the expected status per second: a statement past the store's timeout answers quickly, and wrongly. */
const okRps = (m: LoadResult) => m.rps * (1 - m.errors / Math.max(1, m.requests));
const statusText = (m: LoadResult) => Object.entries(m.statuses).map(([k, n]) => `${k}: ${n}`).join(', ');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Bytes per slot and the retirement job's cost at the largest PostgreSQL size. */
function largestRows(last: SizeResult | undefined): string[] {
  if (!last?.largest) return [];
  const { bytesPerSlot, retirements } = last.largest;
  return [
    '',
    `### Stored size and retirement at ${last.slots.toLocaleString('en')} slots`,
    '',
    `Bytes per stored slot (its resource, version, index and \`booking_slot\` rows with their indexes and TOAST; each table's size shared out by the share of its rows that are Slots${last.slots >= 1_000_000 ? ', the shares read off a 1 % page sample' : ''}): **${bytesPerSlot.toFixed(0)}**.`,
    '',
    '| retirement job run | free slots removed | s | slots/s |',
    '|---|---|---|---|',
    ...retirements.map((r) => `| ${r.what} | ${r.slots.toLocaleString('en')} | ${r.seconds.toFixed(1)} | ${(r.slots / Math.max(r.seconds, 1e-3)).toFixed(0)} |`),
  ];
}

function report(results: SizeResult[], loadAtStart: string): string {
  const names = [...SEARCHES.map((s) => s.name), BOOK, CANCEL];
  const rows: string[] = [];
  for (const r of results) {
    for (const n of names) {
      const m = r.runs[n];
      rows.push(`| ${r.store} | ${r.slots.toLocaleString('en')} | ${n} | ${m.requests} | ${okRps(m).toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors ? `${m.errors} (${statusText(m)})` : 0} |`);
    }
  }
  const sizes = results.map(
    (r) =>
      `| ${r.store} | ${r.slots.toLocaleString('en')} | ${r.appointments.toLocaleString('en')} | ${r.loadS.toFixed(0)} | ${r.vacuumS.toFixed(0)} | ${ms(median(r.cold))} / ${ms(Math.max(...r.cold))} | ${r.fanout.length ? `${r.fanout.map((x) => x.toFixed(0)).join(', ')}` : '–'} |`,
  );
  const postgres = results.filter((r) => r.store === 'PostgreSQL');
  const embedded = results.filter((r) => r.store === 'PGlite');
  const first = postgres[0];
  const last = postgres[postgres.length - 1];
  const ratioRows = (first: SizeResult, last: SizeResult) => names.map((n) => {
    const a = first.runs[n];
    const b = last.runs[n];
    const p50 = b.p50 / a.p50;
    const p99 = b.p99 / a.p99;
    const rps = okRps(b) / okRps(a);
    const met = p50 <= 1.5 && p99 <= 1.5 && rps >= 0.8;
    return `| ${n} | ${p50.toFixed(2)} | ${p99.toFixed(2)} | ${rps.toFixed(2)} | ${met ? 'yes' : 'no'} |`;
  });
  const postgresRatios = postgres.length > 1
    ? [
        '',
        `### PostgreSQL: ${last.slots.toLocaleString('en')} against ${first.slots.toLocaleString('en')} slots`,
        '',
        '| scenario | p50 ratio | p99 ratio | throughput ratio | aim met (p50, p99 ≤ 1.5; throughput ≥ 0.8) |',
        '|---|---|---|---|---|',
        ...ratioRows(first, last),
        '',
        `Cache-cold search p50: ${(median(last.cold) / median(first.cold)).toFixed(2)} x; fan-out (median event): ${last.fanout.length && first.fanout.length ? `${(median(last.fanout) / median(first.fanout)).toFixed(2)} x` : '–'}.`,
      ]
    : [];
  const embeddedRatios = embedded.length > 1
    ? [
        '',
        `### PGlite: ${embedded[embedded.length - 1].slots.toLocaleString('en')} against ${embedded[0].slots.toLocaleString('en')} slots`,
        '',
        '| scenario | p50 ratio | p99 ratio | throughput ratio | aim met (p50, p99 ≤ 1.5; throughput ≥ 0.8) |',
        '|---|---|---|---|---|',
        ...ratioRows(embedded[0], embedded[embedded.length - 1]),
      ]
    : [];
  const plans = last?.plans
    ? [
        `### Plans at ${last.slots.toLocaleString('en')} slots`,
        '',
        'Each search scenario\'s statements for one of its windows, built by the store\'s SQL builder for a searching institution (the guard\'s scope) and run with `EXPLAIN (ANALYZE, BUFFERS)` on the bench database after the load (its pages warm from the run).',
        '',
        ...last.plans.flatMap((p) => [`<details><summary>${p.name}: <code>${p.query.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</code></summary>`, '', ...p.plans.map((x) => `\`\`\`\n${x}\n\`\`\``), '', '</details>', '']),
      ]
    : [];
  return [
    `Calendars of ${DEFAULT_VOLUME.calendars} practitioners (bench/volume/generate.ts: 5 services, weekday hours, public holidays closed, 15-minute slots day by day; ${DEFAULT_VOLUME.fillRate * 100} % booked, ${DEFAULT_VOLUME.cancelRate * 100} % of those cancelled), each size loaded into a database of its own, then \`VACUUM (ANALYZE)\`; one server process per size, guard on (DPoP token and a fresh proof per request, pre-signed before each run), default settings but \`SEARCH_CACHE_ENTRIES=0\` (the calendar window cache would answer repeated windows from memory and hide the store's size). Search windows: one day of a schedule, practitioner or service, drawn from slots sampled over the whole store (\`TABLESAMPLE\`), so at larger sizes they spread over more days, as a year's calendar is searched; searches from 16 institutions. \`$book\` on free slots sampled the same way; cancel: the appointments the \`$book\` runs made (16 workers of one institution, which owns them). ${CONNECTIONS} connections, a ${WARMUP_MS / 1000} s warm-up of each scenario, then ${ROUNDS} rounds of ${ROUND_MS / 1000} s per scenario back to back (the booking before the cancel it feeds); the median round (requests: the sum). Load average ${loadAtStart} at the start, ${loadAverage()} at the end; ${os.cpus().length} cores, the load generator on the same cores.`,
    '',
    '| store | slots | scenario | requests | answered as expected per s | p50 ms | p99 ms | errors (statuses of all answers) |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `| store | slots | appointments | load s | VACUUM (ANALYZE) s | cache-cold search p50 / max ms (${COLD} windows) | fan-out to ${FANOUT} subscriptions, all delivered ms (${FANOUT_EVENTS} events) |`,
    '|---|---|---|---|---|---|---|',
    ...sizes,
    '',
    `Cache-cold search: the first request of each of ${COLD} schedule-and-day windows after the server started, one at a time before any load (no window cache: \`SEARCH_CACHE_ENTRIES=0\`; PostgreSQL's buffers hold what the load and \`VACUUM\` left). Fan-out: ${FANOUT} id-only rest-hook subscriptions of the booking institution on appointment-update, each with a receiver on a port of its own; per event the time from sending a \`PATCH\` of one of its appointments until the last receiver has the notification.`,
    ...postgresRatios,
    ...embeddedRatios,
    ...largestRows(last),
    '',
    'Reading: the store drives a search from one index and checks the other parameters row by row (src/store/search/sql.ts). Each of the three searches has an index that answers it whole: the search by schedule one window of the compound index (schedule, status, time); the chained search (`schedule.actor`) the practitioner\'s schedules through the `actor` reference index, then each one\'s window of the compound index; the service-type search one window of the token-and-date index (service type, time), whose answer is every calendar\'s slots of the service that day (about 3,000 at 500 calendars), so it costs more than a calendar\'s window but the same at any number of months stored. Searches of one shape that arrive together run as one statement; PostgreSQL runs the store\'s sessions without JIT (`jit=off`), which compiled each such batched statement for about a second. The embedded store (PGlite, one connection in the server\'s process) runs the same scenarios: its rows show the size up to which a trial on the default store stays usable.',
    `The aim (docs/requirements.md#performance-aims) is stated for 10,000,000 slots against 10,000: \`BENCH_CURVE_SIZES=10000,100000,1000000,10000000 npm run bench curve\`; loading 10^7 takes about ten times the 10^6 load, then \`VACUUM (ANALYZE)\` of the tables; the measurements take a few minutes per size.`,
    '',
    ...plans,
  ].join('\n');
}
