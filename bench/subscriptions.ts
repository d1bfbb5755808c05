import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { Resource } from '@medplum/fhirtypes';
import { toImportTransaction } from '../src/fhir/import';
import { startReceivers, type ReceiverLog } from './lib/subscription-receivers';
import { startServerProcess } from './lib/server';

const SUBSCRIPTIONS = 1000;
const ROUNDS = 3;
const FHIR_JSON = 'application/fhir+json';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';

/**
 * Subscription fan-out benchmark: 1,000 active subscriptions (each with a receiver of its own on loopback),
 * one appointment change; time from sending the change until each receiver got its notification.
 * The server runs in its own process with its default delivery settings; the receivers run here.
 */
export async function benchSubscriptions(): Promise<string> {
  const parts = [await fanOutOn(await embeddedStore())];
  if (process.env.DATABASE_URL) parts.push(await fanOutOn(await postgresStore(process.env.DATABASE_URL)));
  return parts.join('\n\n');
}

async function fanOutOn({ env, store, cleanup }: Store): Promise<string> {
  const receivers = await startReceivers(SUBSCRIPTIONS);
  const server = await startServerProcess({ ...env, DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off' });
  try {
    const fixture = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'isik-stufe5.json'), 'utf8')) as Resource;
    await call(server.url, 'POST', '/fhir', toImportTransaction(fixture), 200);
    const appointment = (await call(server.url, 'POST', '/fhir/Appointment/$book', proposal(), 201)) as { id: string };

    const created = Date.now();
    for (let i = 0; i < SUBSCRIPTIONS; i += 50) {
      await Promise.all(receivers.logs.slice(i, i + 50).map((r) => call(server.url, 'POST', '/fhir/Subscription', subscription(r.port), 201)));
    }
    await until(() => receivers.logs.every((r) => r.handshakes > 0), 120_000, 'handshakes');
    // The server turns each subscription active after its handshake: the first event must not race that setup work.
    await untilAsync(async () => ((await call(server.url, 'GET', '/fhir/Subscription?status=active&_summary=count', undefined, 200)) as { total: number }).total === SUBSCRIPTIONS, 120_000, 'all active');
    const setupS = (Date.now() - created) / 1000;

    const rounds: { p50: number; p95: number; p99: number; max: number }[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const t0 = performance.now();
      await call(server.url, 'PATCH', `/fhir/Appointment/${appointment.id}`, comment(`Runde ${round}`), 200);
      await until(() => receivers.logs.every((r) => r.arrivals.has(round)), 120_000, `round ${round}`);
      rounds.push(stats(receivers.logs, round, t0));
      await new Promise((r) => setTimeout(r, 500));
    }
    const head = '| event | receivers | p50 ms | p95 ms | p99 ms | all delivered ms |\n|---|---|---|---|---|---|';
    const rows = rounds.map((s, i) => `| ${i + 1} | ${SUBSCRIPTIONS} | ${s.p50.toFixed(0)} | ${s.p95.toFixed(0)} | ${s.p99.toFixed(0)} | ${s.max.toFixed(0)} |`);
    return [
      `**${store}.** Server in its own process (default delivery settings: 64 endpoints at a time), ${SUBSCRIPTIONS.toLocaleString('en')} active id-only rest-hook subscriptions on \`appointment-update\`, each with its own HTTP receiver (own port) in the benchmark process; machine: ${os.cpus().length} cores.`,
      `Setup (1,000 creates and handshakes, until the server shows every subscription active): ${setupS.toFixed(1)} s. Each event: one \`PATCH\` of a booked Appointment; the clock starts before the PATCH is sent and stops when a receiver has the notification.`,
      '',
      head,
      ...rows,
    ].join('\n');
  } finally {
    await server.stop();
    await receivers.stop();
    await cleanup();
  }
}

function stats(logs: ReceiverLog[], round: number, t0: number): { p50: number; p95: number; p99: number; max: number } {
  const ms = logs.map((r) => r.arrivals.get(round)! - t0).sort((a, b) => a - b);
  const at = (q: number) => ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)];
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: ms[ms.length - 1] };
}

async function until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

async function untilAsync(done: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function call(base: string, method: string, p: string, body: unknown, expect: number): Promise<unknown> {
  const res = await fetch(`${base}${p}`, { method, headers: { 'content-type': FHIR_JSON, accept: FHIR_JSON }, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = (await res.json()) as unknown;
  if (res.status !== expect) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
  return json;
}

function subscription(port: number): Resource {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'benchmark',
    criteria: 'https://gematik.de/fhir/isik/SubscriptionTopic/appointment-update',
    channel: {
      type: 'rest-hook',
      endpoint: `http://127.0.0.1:${port}/notify`,
      payload: FHIR_JSON,
      _payload: { extension: [{ url: `${BP}/backport-payload-content`, valueCode: 'id-only' }] },
      header: ['Authorization: Bearer bench-token-0123456789'],
    },
  } as Resource;
}

function proposal(): Resource {
  return {
    resourceType: 'Appointment',
    meta: { tag: [{ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' }] },
    status: 'proposed',
    comment: 'Benchmark',
    start: '2027-01-01T11:05:00Z',
    end: '2027-01-01T11:55:00Z',
    serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] }],
    specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' }] }],
    slot: [{ reference: 'Slot/Slot-Free-Example' }],
    participant: [{ actor: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' }, status: 'accepted' }],
  } as Resource;
}

function comment(text: string): Resource {
  return {
    resourceType: 'Parameters',
    parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.comment' }, { name: 'value', valueString: text }] }],
  } as Resource;
}

interface Store {
  env: Record<string, string>;
  store: string;
  cleanup(): Promise<void>;
}

async function postgresStore(base: string): Promise<Store> {
  const admin = new Pool({ connectionString: base, max: 1 });
  await admin.query('DROP DATABASE IF EXISTS terminus_bench_subscriptions WITH (FORCE)');
  await admin.query('CREATE DATABASE terminus_bench_subscriptions');
  await admin.end();
  const url = new URL(base);
  url.pathname = '/terminus_bench_subscriptions';
  return {
    env: { DATABASE_URL: url.toString() },
    store: 'PostgreSQL (local)',
    cleanup: async () => {
      const a = new Pool({ connectionString: base, max: 1 });
      await a.query('DROP DATABASE IF EXISTS terminus_bench_subscriptions WITH (FORCE)').catch(() => undefined);
      await a.end();
    },
  };
}

async function embeddedStore(): Promise<Store> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-subs-'));
  return { env: { DATA_DIR: dir, DATABASE_URL: '' }, store: 'PGlite (embedded)', cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }) };
}
