import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import { createCardCa } from '../src/guard/pki/dev-pki';
import { loadAverage } from './lib/cpu';
import { ms, runLoad, type LoadResult } from './lib/load';
import { startServerProcess, type ServerProcess } from './lib/server';
import { book, prepare as prepareBookings } from './book';
import { authenticatedRequests, medianOf, prepareStore, rotatingRounds } from './pep';

const CONNECTIONS = 32;
const ROUNDS = 5;
const ROUND_MS = 4_000;
const WARMUP_MS = 3_000;
const BOOK_SLOTS = 20_000;

export const AUDIT_READING =
  'Reading: with `AUDIT_MODE=sync` a read is answered once its AuditEvent is stored: the events of the reads answered in one turn of the event loop go into one statement (a compare-and-set of the chain head with an INSERT of the rows passed as arrays, one prepared statement, committed on its own), up to four such statements in flight per process, each on a chain of its own, so under load one commit carries many and no caller waits for the commit before its own. A booking\'s AuditEvents (the Appointment created, the Slot taken) are data-modifying CTEs of the booking\'s own statements: no round trip of their own; they are linked into a chain right after the commit, in the background. A row stores the record its AuditEvent is rendered from (`src/audit/stored-form.ts`, about 750 bytes for a slot search\'s event against 2.2 KB of BALP JSON, so below PostgreSQL\'s 2 KB compression threshold) and its search columns read off the record; ids are time-ordered (UUIDv7), and one GIN index covers the patient, entity and agent columns (migrations/501_audit_lean.sql). The bytes are the audit partitions with their indexes (`pg_total_relation_size`) over the events stored in the run.';

/**
 * The audit trail's price: the guarded slot search and `$book` with `AUDIT_MODE=off` and `sync`,
 * each server in its own process on the same data, in rotating rounds of the same run; and the
 * audit table's growth per audited request.
 */
export async function benchAudit(): Promise<string> {
  const sections: string[] = [];
  if (process.env.DATABASE_URL) {
    sections.push(await searchWith(true), await bookingWith(process.env.DATABASE_URL));
  }
  sections.push(await searchWith(false));
  return [...sections, AUDIT_READING].join('\n\n');
}

async function searchWith(postgres: boolean): Promise<string> {
  const store = await prepareStore(postgres);
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-audit-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const common = { DEMO_DATA: 'false', CARD_TRUST_ANCHORS: anchors, RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_IP: '100000', GUARD_ENFORCEMENT: 'on' };
  const loadAtStart = loadAverage();
  const servers: ServerProcess[] = [];
  const start = async (env: Record<string, string>) => {
    const s = await startServerProcess({ ...common, ...env });
    servers.push(s);
    return s;
  };
  try {
    // PGlite belongs to one process: each server its own copy (prepareStore made two).
    const pairs: { name: string; off: Record<string, string>; on: Record<string, string> }[] = [{ name: 'window cache (default)', off: store.env, on: store.envCopy }];
    if (postgres) pairs.push({ name: 'no cache (`SEARCH_CACHE_ENTRIES=0`)', off: { ...store.env, SEARCH_CACHE_ENTRIES: '0' }, on: { ...store.env, SEARCH_CACHE_ENTRIES: '0' } });
    const scenarios = [];
    for (const p of pairs) {
      const off = await start({ ...p.off, AUDIT_MODE: 'off' });
      const on = await start({ ...p.on, AUDIT_MODE: 'sync' });
      scenarios.push(
        { name: `guarded slot search, ${p.name}, \`AUDIT_MODE=off\``, server: off, next: await authenticatedRequests(off.url, ca, 200_000) },
        { name: `guarded slot search, ${p.name}, \`AUDIT_MODE=sync\``, server: on, next: await authenticatedRequests(on.url, ca, 200_000) },
      );
    }
    const before = postgres ? await auditSize(store.env.DATABASE_URL) : undefined;
    const measured = await rotatingRounds(scenarios, CONNECTIONS, ROUND_MS, postgres);
    const after = postgres ? await auditSize(store.env.DATABASE_URL) : undefined;
    const rows = scenarios.map((sc, i) => {
      const m = medianOf(measured[i].runs);
      const ratio = i % 2 === 1 ? ` ${keeps(measured[i].runs, measured[i - 1].runs)}` : ' –';
      return `| ${sc.name} | ${m.requests} | ${m.rps.toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors} |${ratio} |`;
    });
    const audited = scenarios.reduce((n, _sc, i) => (i % 2 === 1 ? n + measured[i].runs.reduce((s, r) => s + r.requests, 0) : n), 0);
    const growth = before && after ? `The audit partitions grew by ${(after.bytes - before.bytes).toLocaleString('en')} bytes for ${(after.events - before.events).toLocaleString('en')} AuditEvents (warm-up included; ${audited.toLocaleString('en')} audited searches measured): **${Math.round((after.bytes - before.bytes) / Math.max(1, after.events - before.events))} bytes per audited search** (one AuditEvent each: a slot search returns no patient).` : '';
    return [
      `**${store.store}.** The guarded slot search of the enforcement-point benchmark (32 institutions, a fresh DPoP proof per request, \`Slot?schedule=X&status=free&start=ge..&start=le..&_count=10\`), each server in its own process on the same data; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per scenario after a ${WARMUP_MS / 1000} s warm-up, rotating order; the median round. Load average ${loadAtStart} at the start, ${loadAverage()} at the end; ${os.cpus().length} cores.`,
      '',
      '| scenario | requests | req/s | p50 ms | p99 ms | errors | sync keeps of off (median of rounds; per round) |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      growth,
      'Aim: `AUDIT_MODE=sync` keeps at least 0.9 of the throughput without auditing.',
    ].join('\n');
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await store.cleanup();
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
}

async function bookingWith(databaseUrl: string): Promise<string> {
  const store = await prepareBookings(databaseUrl, 2 * BOOK_SLOTS + 1);
  const common = { DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', GUARD_KEY_SECRET: 'bench-audit-secret-of-at-least-32-characters' };
  const servers: ServerProcess[] = [];
  const loadAtStart = loadAverage();
  try {
    const off = await startServerProcess({ ...store.env, ...common, AUDIT_MODE: 'off' });
    servers.push(off);
    const on = await startServerProcess({ ...store.env, ...common, AUDIT_MODE: 'sync' });
    servers.push(on);
    const contenders = [
      { name: '`$book`, `AUDIT_MODE=off`', server: off, next: book(0) },
      { name: '`$book`, `AUDIT_MODE=sync`', server: on, next: book(BOOK_SLOTS) },
    ];
    for (const c of contenders) await runLoad({ baseUrl: c.server.url, connections: CONNECTIONS, durationMs: WARMUP_MS, next: c.next });
    const before = await auditSize(store.env.DATABASE_URL);
    const runs = contenders.map(() => [] as LoadResult[]);
    for (let r = 0; r < ROUNDS; r++) {
      for (let j = 0; j < contenders.length; j++) {
        const i = (j + r) % contenders.length;
        const c = contenders[i];
        runs[i].push(await runLoad({ baseUrl: c.server.url, connections: CONNECTIONS, durationMs: ROUND_MS, next: c.next, expectStatus: (st) => st === 201 }));
      }
    }
    const after = await auditSize(store.env.DATABASE_URL);
    const booked = runs[1].reduce((s, r) => s + r.requests, 0);
    const rows = contenders.map((c, i) => {
      const m = medianOf(runs[i]);
      return `| ${c.name} | ${m.requests} | ${m.rps.toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors} | ${i === 1 ? keeps(runs[1], runs[0]) : '–'} |`;
    });
    return [
      `**PostgreSQL (local), \`$book\`.** ${(2 * BOOK_SLOTS).toLocaleString('en')} free Slots in 20 Schedules, one database, each server booking the next unused slot of its own range; guard off (the audit trail records each booking with the address). ${ROUNDS} rounds of ${ROUND_MS / 1000} s per server, rotating, after a ${WARMUP_MS / 1000} s warm-up; load average ${loadAtStart} at the start, ${loadAverage()} at the end.`,
      '',
      '| contender | bookings | bookings/s | p50 ms | p99 ms | errors | sync keeps of off (median; per round) |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `The audit partitions grew by ${(after.bytes - before.bytes).toLocaleString('en')} bytes for ${(after.events - before.events).toLocaleString('en')} AuditEvents over ${booked.toLocaleString('en')} bookings: **${Math.round((after.bytes - before.bytes) / Math.max(1, booked))} bytes per audited booking** (${((after.events - before.events) / Math.max(1, booked)).toFixed(1)} AuditEvents each: the Appointment created and the Slot it took).`,
      'Aim: `AUDIT_MODE=sync` keeps at least 0.9 of the bookings per second without auditing.',
    ].join('\n');
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await store.cleanup();
  }
}

/** The ratio of the medians of per-round throughputs, and each round's. */
function keeps(on: LoadResult[], off: LoadResult[]): string {
  const per = on.map((r, k) => r.rps / off[k].rps);
  const median = [...per].sort((a, b) => a - b)[Math.floor(per.length / 2)];
  return `**${median.toFixed(2)}** (${per.map((x) => x.toFixed(2)).join(', ')})`;
}

/** The audit partitions' bytes (table, indexes, TOAST) and their events. */
async function auditSize(databaseUrl: string): Promise<{ bytes: number; events: number }> {
  const pool = new Pool({ connectionString: databaseUrl, max: 1 });
  try {
    const { rows } = await pool.query<{ bytes: string; events: string }>(
      "SELECT (SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = 'audit_event'::regclass)::text AS bytes, (SELECT count(*) FROM audit_event)::text AS events",
    );
    return { bytes: Number(rows[0].bytes), events: Number(rows[0].events) };
  } finally {
    await pool.end();
  }
}
