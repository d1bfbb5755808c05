import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { Appointment, Resource } from '@medplum/fhirtypes';
import { composeTerminus } from '../src/app';
import { loadConfig } from '../src/config';
import { handle } from '../src/fhir/interactions';
import { createLogger } from '../src/logger';
import { openDb, type Db, type QueryOptions } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { Repository } from '../src/store/repository';
import { checkout } from './compare';
import { cpuMeter, loadAverage, pidsNamed } from './lib/cpu';
import type { BookingTemplate } from './lib/floor-server';
import { ms, runLoad, row, TABLE_HEAD, type LoadResult } from './lib/load';
import { startFloorServer, startServerProcess, type ServerProcess } from './lib/server';
import { medianOf } from './pep';

const SCHEDULES = 20;
/** Slots per contender (this tree, the baseline, the floor book from their own ranges). */
const SLOTS = 25_000;
const CONNECTIONS = 32;
const DURATION_MS = 15_000;
const WARMUP_MS = 3_000;
const ROUNDS = 5;
const ROUND_MS = 4_000;
const FIRST_MS = Date.UTC(2031, 0, 1, 6);
const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';
const SERVICE_TYPE = { system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177', display: 'Neurology' };
const NEUR = { system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR', display: 'Neurologie' };
const BOOK_HEADERS = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };

/**
 * Booking benchmark: `$book` at 32 concurrent clients, every request on a distinct
 * free slot (slots spread over 20 schedules), each server in its own process. With PostgreSQL, in
 * the same run and in rotating rounds: this tree, a baseline revision (BENCH_BOOK_BASELINE, default
 * 52983cc: before the performance work, whose first change woke the subscription loop once per commit) and the floor (the statements of one captured booking
 * replayed per slot with `pg`, in one transaction, by floor-server.ts). PGlite: this tree alone.
 */
export async function benchBook(): Promise<string> {
  const sections: string[] = [];
  if (process.env.DATABASE_URL) sections.push(await benchPostgres(process.env.DATABASE_URL));
  sections.push(await benchPglite());
  return sections.join('\n\n');
}

export const book = (first: number) => {
  let next = first;
  return () => ({ method: 'POST', path: '/fhir/Appointment/$book', headers: BOOK_HEADERS, body: proposal(next++) });
};

async function benchPostgres(databaseUrl: string): Promise<string> {
  const rev = process.env.BENCH_BOOK_BASELINE ?? '52983cc';
  const store = await prepare(databaseUrl, 3 * SLOTS + 1);
  const baseline = checkout(rev);
  const common = { DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', GUARD_KEY_SECRET: 'bench-book-secret-of-at-least-32-characters' };
  const servers: ServerProcess[] = [];
  const loadAtStart = loadAverage();
  try {
    const template = await captureBooking(store.env.DATABASE_URL, 3 * SLOTS);
    const head = await startServerProcess({ ...store.env, ...common });
    servers.push(head);
    const base = await startServerProcess({ ...store.env, ...common, LOG_LEVEL: 'warn' }, baseline.root);
    servers.push(base);
    const floor = await startFloorServer(
      { answers: { '/fhir/Appointment/$book': { body: template.answer, contentType: 'application/fhir+json', status: 201 } }, transaction: true, booking: template.booking },
      { DATABASE_URL: store.env.DATABASE_URL },
    );
    servers.push(floor);
    const contenders = [
      { name: 'this tree', server: head, next: book(0) },
      { name: `baseline \`${rev}\``, server: base, next: book(SLOTS) },
      { name: 'floor (the captured booking\'s statements replayed with `pg` in one transaction)', server: floor, next: book(2 * SLOTS) },
    ];
    for (const c of contenders) await runLoad({ baseUrl: c.server.url, connections: CONNECTIONS, durationMs: WARMUP_MS, next: c.next });
    const runs = contenders.map(() => [] as LoadResult[]);
    const cpu = contenders.map(() => [] as Record<string, number>[]);
    for (let r = 0; r < ROUNDS; r++) {
      for (let j = 0; j < contenders.length; j++) {
        const i = (j + r) % contenders.length;
        const c = contenders[i];
        const meter = cpuMeter({ server: () => [c.server.pid], postgres: () => pidsNamed('postgres') });
        const run = await runLoad({ baseUrl: c.server.url, connections: CONNECTIONS, durationMs: ROUND_MS, next: c.next, expectStatus: (st) => st === 201 });
        runs[i].push(run);
        cpu[i].push(Object.fromEntries(Object.entries(meter.stop()).map(([k, v]) => [k, (v * 1000) / Math.max(1, run.requests)])));
      }
    }
    const ratio = (a: number, b: number) => median(runs[a].map((x, k) => x.rps / runs[b][k].rps));
    const perRound = (a: number, b: number) => runs[a].map((x, k) => (x.rps / runs[b][k].rps).toFixed(2)).join(', ');
    const rows = contenders.map((c, i) => {
      const m = medianOf(runs[i]);
      const cpuText = ['server', 'postgres'].map((n) => `${n} ${median(cpu[i].map((x) => x[n])).toFixed(2)}`).join(', ');
      return `| ${c.name} | ${m.requests} | ${m.rps.toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors} | ${cpuText} |`;
    });
    return [
      `**PostgreSQL (local), ${CONNECTIONS} clients.** ${(3 * SLOTS).toLocaleString('en')} free 15-minute Slots in ${SCHEDULES} Schedules, one database; each contender books the next unused slot of its own range; guard off, default log level (the baseline at \`warn\`). ${ROUNDS} rounds of ${ROUND_MS / 1000} s per contender in rotating order after a ${WARMUP_MS / 1000} s warm-up each; the table shows the median round (requests: the sum). Load average (1 / 5 / 15 min) ${loadAtStart} at the start, ${loadAverage()} at the end; ${os.cpus().length} cores.`,
      '',
      '| contender | bookings | bookings/s | p50 ms | p99 ms | errors | CPU ms per booking |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `This tree books **${ratio(0, 1).toFixed(2)} x** the baseline's bookings/s (per round: ${perRound(0, 1)}) and reaches ${ratio(0, 2).toFixed(2)} of the floor (per round: ${perRound(0, 2)}; the baseline ${ratio(1, 2).toFixed(2)}). The booking captured in process is ${template.booking.sql.length + 2} statements, BEGIN and COMMIT included${template.outside.length ? `, plus ${template.outside.length} outside it (${template.outside.map((t) => `\`${t.replace(/\s+/g, ' ').slice(0, 60)}…\``).join(', ')})` : ''} (over HTTP test/booking/round-trips.test.ts counts and keeps it at most 5; the baseline sent 10).`,
      'Aims (docs/requirements.md#performance-aims): at least 2 x the baseline in the same run, at most 8 statements (its build list: at most 5 round trips), p99 under 100 ms.',
    ].join('\n');
  } finally {
    await Promise.all(servers.map((x) => x.stop()));
    baseline.remove();
    await store.cleanup();
  }
}

async function benchPglite(): Promise<string> {
  const store = await prepare(undefined, SLOTS);
  const lines = [
    `**PGlite (embedded).** ${SLOTS.toLocaleString('en')} free Slots in ${SCHEDULES} Schedules; this tree in its own process, guard off, ${CONNECTIONS} and 4 clients, ${DURATION_MS / 1000} s each after a ${WARMUP_MS / 1000} s warm-up; load average ${loadAverage()}.`,
    '',
    TABLE_HEAD,
  ];
  const server = await startServerProcess({ ...store.env, DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off' });
  try {
    const next = book(0);
    await runLoad({ baseUrl: server.url, connections: 4, durationMs: WARMUP_MS, next });
    for (const connections of [CONNECTIONS, 4]) {
      const r = await runLoad({ baseUrl: server.url, connections, durationMs: DURATION_MS, maxRequests: SLOTS / 3, next, expectStatus: (st) => st === 201 });
      lines.push(row(`\`POST /fhir/Appointment/$book\`, slot mode, PGlite, ${connections} clients`, r));
    }
  } finally {
    await server.stop();
    await store.cleanup();
  }
  lines.push('', 'PGlite is one connection: every booking waits for the ones before it, so at 32 clients p99 is the queue. Aim (docs/requirements.md#performance-aims): p99 under 1 s at 32 clients (ISiK: 2 s).');
  return lines.join('\n');
}

/**
 * The statements of one `$book` of slot `index` (in-process, on the store): the floor replays them
 * per slot. Also the answer's bytes (the floor answers them).
 */
async function captureBooking(databaseUrl: string, index: number): Promise<{ booking: BookingTemplate; answer: string; outside: string[] }> {
  const db = await openDb({ databaseUrl });
  const sql: { text: string; values: unknown[] }[] = [];
  const outside: string[] = [];
  let capturing = false;
  const capture = (inner: Db): Db => {
    const db = {
      kind: inner.kind,
      inTransaction: inner.inTransaction,
      query: (text: string, values?: unknown[], opts?: QueryOptions) => {
        if (capturing && inner.inTransaction) sql.push({ text, values: values ?? [] });
        else if (capturing) outside.push(text);
        return inner.query(text, values, opts);
      },
      // Inside a transaction the same Db, as the store's own (a nested transaction joins it, and the repository keeps its lock cache).
      transaction: <T>(fn: (tx: Db) => Promise<T>) => (inner.inTransaction ? fn(db) : inner.transaction((tx) => fn(capture(tx)))),
      afterCommit: (fn: () => void) => inner.afterCommit(fn),
      close: () => inner.close(),
    } as Db;
    return db;
  };
  const config = loadConfig({ DATABASE_URL: databaseUrl, DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', LOG_LEVEL: 'silent', METRICS_PORT: '0', PUBLIC_URL: 'http://127.0.0.1' });
  const terminus = composeTerminus({ config, db: capture(db), logger: createLogger('silent'), now: () => new Date() });
  try {
    capturing = true;
    const res = await handle({ method: 'POST', path: ['Appointment', '$book'], query: [], headers: {}, body: JSON.parse(proposal(index)) }, terminus.fhir);
    capturing = false;
    if (res.status !== 201) throw new Error(`template booking: ${res.status}`);
    const appointment = res.body as Appointment;
    const slot = slotOf(index);
    return {
      booking: {
        sql,
        slotId: slot.id,
        scheduleId: `bench-book-s-${slot.schedule}`,
        appointmentId: appointment.id as string,
        start: new Date(slot.start).toISOString(),
        end: new Date(slot.end).toISOString(),
        slotPrefix: 'bench-book-',
        schedulePrefix: 'bench-book-s-',
        schedules: SCHEDULES,
        firstMs: FIRST_MS,
        minutes: 15,
      },
      answer: JSON.stringify(appointment),
      outside,
    };
  } finally {
    await terminus.stop();
    await db.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function proposal(i: number): string {
  const { start, end, id } = slotOf(i);
  const appointment: Appointment = {
    resourceType: 'Appointment',
    meta: { profile: [`${ISIK}ISiKTermin`] },
    status: 'proposed',
    start,
    end,
    serviceType: [{ coding: [SERVICE_TYPE] }],
    specialty: [{ coding: [NEUR] }],
    slot: [{ reference: `Slot/${id}` }],
    participant: [{ actor: { reference: 'Patient/bench-patient', display: 'Bench Patient' }, status: 'accepted' }],
  };
  return JSON.stringify(appointment);
}

/** Slot i: schedule i % SCHEDULES, consecutive 15-minute slots per schedule from 2031-01-01. */
function slotOf(i: number): { id: string; schedule: number; start: string; end: string } {
  const schedule = i % SCHEDULES;
  const k = Math.floor(i / SCHEDULES);
  const start = FIRST_MS + k * 15 * 60_000;
  return { id: `bench-book-${i}`, schedule, start: new Date(start).toISOString().replace('.000Z', 'Z'), end: new Date(start + 15 * 60_000).toISOString().replace('.000Z', 'Z') };
}

export async function prepare(databaseUrl: string | undefined, slots: number): Promise<{ name: string; env: Record<string, string>; cleanup(): Promise<void> }> {
  if (databaseUrl) {
    const admin = new Pool({ connectionString: databaseUrl, max: 1 });
    await admin.query('DROP DATABASE IF EXISTS terminus_bench_book WITH (FORCE)');
    await admin.query('CREATE DATABASE terminus_bench_book');
    await admin.end();
    const url = new URL(databaseUrl);
    url.pathname = '/terminus_bench_book';
    await load(url.toString(), undefined, slots);
    return {
      name: 'PostgreSQL 15 (local)',
      env: { DATABASE_URL: url.toString() },
      cleanup: async () => {
        const a = new Pool({ connectionString: databaseUrl, max: 1 });
        await a.query('DROP DATABASE IF EXISTS terminus_bench_book WITH (FORCE)').catch(() => undefined);
        await a.end();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-book-'));
  await load(undefined, dir, slots);
  return { name: 'PGlite (embedded)', env: { DATA_DIR: dir, DATABASE_URL: '' }, cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }) };
}

async function load(databaseUrl: string | undefined, dataDir: string | undefined, slots: number): Promise<void> {
  const db = await openDb({ databaseUrl, dataDir });
  await migrate(db);
  const repo = new Repository(db, 'http://127.0.0.1/fhir');
  const base: Resource[] = [{ resourceType: 'Patient', id: 'bench-patient', active: true, name: [{ family: 'Bench', given: ['Patient'] }] }];
  for (let s = 0; s < SCHEDULES; s++) {
    base.push({
      resourceType: 'Schedule',
      id: `bench-book-s-${s}`,
      meta: { profile: [`${ISIK}ISiKKalender`] },
      active: true,
      serviceType: [{ coding: [SERVICE_TYPE] }],
      specialty: [{ coding: [NEUR] }],
      actor: [{ reference: `Practitioner/bench-p-${s}`, display: `Dr. Bench ${s}` }],
    });
  }
  await repo.bulkLoad(base);
  const batch: Resource[] = [];
  for (let i = 0; i < slots; i++) {
    const s = slotOf(i);
    batch.push({
      resourceType: 'Slot',
      id: s.id,
      meta: { profile: [`${ISIK}ISiKTerminblock`] },
      serviceType: [{ coding: [SERVICE_TYPE] }],
      specialty: [{ coding: [NEUR] }],
      schedule: { reference: `Schedule/bench-book-s-${s.schedule}` },
      status: 'free',
      start: s.start,
      end: s.end,
    });
    if (batch.length >= 5000) await repo.bulkLoad(batch.splice(0));
  }
  await repo.bulkLoad(batch.splice(0));
  await db.query('ANALYZE');
  await db.close();
}

/** `node --import tsx bench/book.ts`: runs it and replaces the booking section of RESULTS.md. */
if (require.main === module) {
  (async () => {
    const file = path.join(__dirname, 'RESULTS.md');
    const body = await benchBook();
    const section = `<!-- bench:book -->\n## Booking: \`$book\` throughput and latency\n\nMeasured ${new Date().toISOString().slice(0, 16)}Z.\n\n${body}\n<!-- /bench:book -->`;
    let doc = fs.readFileSync(file, 'utf8');
    const re = /<!-- bench:book -->[\s\S]*?<!-- \/bench:book -->/;
    doc = re.test(doc) ? doc.replace(re, section) : `${doc.trimEnd()}\n\n${section}\n`;
    fs.writeFileSync(file, doc);
    process.stdout.write(`${body}\n`);
  })().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
