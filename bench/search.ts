import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { Resource } from '@medplum/fhirtypes';
import { openDb } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { Repository } from '../src/store/repository';
import { runLoad, row, TABLE_HEAD } from './lib/load';
import { startServerProcess } from './lib/server';

const SCHEDULES = 50;
const SLOTS = 100_000;
const CONNECTIONS = 32;
const DURATION_MS = 20_000;

/**
 * Slot search benchmark: 100,000 Slots in 50 Schedules; the ISiK slot query over 31 days with
 * `_count=50`, and an empty-result query, each at 32 connections for 20 s against a server in its
 * own process.
 */
export async function benchSearch(): Promise<string> {
  const { env, store, cleanup } = await prepareStore();
  const server = await startServerProcess({ ...env, DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off' });
  try {
    const day = (offset: number) => new Date(Date.UTC(2030, 0, 2 + offset)).toISOString().slice(0, 10);
    const warm = await runLoad({ baseUrl: server.url, connections: 4, durationMs: 3000, next: () => ({ path: slotQuery(1, day(0), day(31)) }) });
    void warm;
    const window = await runLoad({
      baseUrl: server.url,
      connections: CONNECTIONS,
      durationMs: DURATION_MS,
      next: (_c, n) => ({ path: slotQuery((n % SCHEDULES) + 1, day(n % 20), day((n % 20) + 31)), headers: { accept: 'application/fhir+json' } }),
      expectStatus: (s) => s === 200,
    });
    const empty = await runLoad({
      baseUrl: server.url,
      connections: CONNECTIONS,
      durationMs: DURATION_MS,
      next: (_c, n) => ({ path: slotQuery((n % SCHEDULES) + 1, '2031-06-01', '2031-07-02'), headers: { accept: 'application/fhir+json' } }),
      expectStatus: (s) => s === 200,
    });
    const single = await runLoad({
      baseUrl: server.url,
      connections: 1,
      durationMs: 10_000,
      next: (_c, n) => ({ path: slotQuery((n % SCHEDULES) + 1, day(n % 20), day((n % 20) + 31)), headers: { accept: 'application/fhir+json' } }),
      expectStatus: (s) => s === 200,
    });
    const singleEmpty = await runLoad({
      baseUrl: server.url,
      connections: 1,
      durationMs: 10_000,
      next: (_c, n) => ({ path: slotQuery((n % SCHEDULES) + 1, '2031-06-01', '2031-07-02'), headers: { accept: 'application/fhir+json' } }),
      expectStatus: (s) => s === 200,
    });
    return [
      `Store: ${store}; ${SLOTS.toLocaleString('en')} Slots in ${SCHEDULES} Schedules (80% free, 15-minute slots), server in its own process, ${CONNECTIONS} connections, ${DURATION_MS / 1000} s each, machine: ${os.cpus().length} cores.`,
      '',
      TABLE_HEAD,
      row('`Slot?schedule=X&status=free&start=ge..&start=le..` (31 days, `_count=50`)', window),
      row('same, empty result (no slots in the window)', empty),
      row('window query, 1 connection (latency without queueing)', single),
      row('empty result, 1 connection', singleEmpty),
      '',
      `Aim: p99 under 20 ms for the window query, under 5 ms for the empty result (ISiK: under 2 s and under 500 ms).`,
      `With 32 clients in a closed loop, latency is about 32 / throughput: the server is one Node process sharing 2 cores with PostgreSQL and the load generator, so the 32-client p99 measures capacity; the 1-connection rows show the cost of one request.`,
    ].join('\n');
  } finally {
    await server.stop();
    await cleanup();
  }
}

function slotQuery(schedule: number, from: string, to: string): string {
  return `/fhir/Slot?schedule=Schedule/bench-s-${schedule}&status=free&start=ge${from}&start=le${to}&_count=50`;
}

async function prepareStore(): Promise<{ env: Record<string, string>; store: string; cleanup(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (base) {
    const admin = new Pool({ connectionString: base, max: 1 });
    await admin.query('DROP DATABASE IF EXISTS terminus_bench');
    await admin.query('CREATE DATABASE terminus_bench');
    await admin.end();
    const url = new URL(base);
    url.pathname = '/terminus_bench';
    await load(url.toString(), undefined);
    return {
      env: { DATABASE_URL: url.toString() },
      store: 'PostgreSQL 15 (local)',
      cleanup: async () => {
        const a = new Pool({ connectionString: base, max: 1 });
        await a.query('DROP DATABASE IF EXISTS terminus_bench WITH (FORCE)').catch(() => undefined);
        await a.end();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-'));
  await load(undefined, dir);
  return { env: { DATA_DIR: dir, DATABASE_URL: '' }, store: 'PGlite (embedded)', cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }) };
}

export async function load(databaseUrl: string | undefined, dataDir: string | undefined): Promise<void> {
  const db = await openDb({ databaseUrl, dataDir });
  await migrate(db);
  const repo = new Repository(db, 'http://127.0.0.1/fhir');
  const schedules: Resource[] = [];
  for (let s = 1; s <= SCHEDULES; s++) {
    schedules.push({
      resourceType: 'Schedule',
      id: `bench-s-${s}`,
      active: true,
      serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] }],
      specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'ALLG' }] }],
      actor: [{ reference: `Practitioner/bench-p-${s}`, display: `Dr. Bench ${s}` }],
    });
  }
  await repo.bulkLoad(schedules);
  const perSchedule = SLOTS / SCHEDULES;
  const batch: Resource[] = [];
  for (let s = 1; s <= SCHEDULES; s++) {
    for (let i = 0; i < perSchedule; i++) {
      const dayIndex = Math.floor(i / 32);
      const start = Date.UTC(2030, 0, 1 + dayIndex, 7) + (i % 32) * 15 * 60000;
      batch.push({
        resourceType: 'Slot',
        id: `bench-${s}-${i}`,
        schedule: { reference: `Schedule/bench-s-${s}` },
        status: i % 5 === 0 ? 'busy' : 'free',
        start: new Date(start).toISOString(),
        end: new Date(start + 15 * 60000).toISOString(),
      });
      if (batch.length >= 5000) await repo.bulkLoad(batch.splice(0));
    }
  }
  await repo.bulkLoad(batch.splice(0));
  await db.query('ANALYZE');
  await db.close();
}
