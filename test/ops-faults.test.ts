import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'pg';
import type { Bundle, Slot } from '@medplum/fhirtypes';
import { ClientSession, createClient } from '../src/client';
import { bookParameters } from '../src/client/stress';
import { createDevPki, writeDevPki } from '../src/guard/pki/dev-pki';
import { freePort } from './helpers/swtpm';
import { tcpRelay, type TcpRelay } from './helpers/relay';
import { CANCEL, notificationEvents, Receiver, sleep, statusOf, subscription } from './subscriptions/helpers';
import { entryArgs } from './helpers/entry';

/**
 * Faults under load: `terminus serve` on PostgreSQL and Redis, each reached through a
 * TCP relay the test breaks, while 64 clients search and book through the guard. PostgreSQL is
 * cut (connections reset, new ones refused), then partitioned (connections hang, nothing
 * answers), then Redis is cut and partitioned. Throughout:
 * - a probe (one guarded search at a time) gets 200 or 503 within 5 s, never a hang or a 500,
 *   and 200 again within 5 s of the dependency's return;
 * - the load sees only 2xx, 409 (slot taken) and 503, and the process never exits;
 * - afterwards no booking the clients were told about is missing, no slot is held twice, and
 *   every Appointment in the store reached the subscriber under exactly one event number.
 */
const pgUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;
const describeFaults = pgUrl && redisUrl ? describe : describe.skip;

const FAULT_MS = 6000;
const BOUND_MS = 5000;
const CLIENTS = 64;
const PASSWORD = 'fault-test-password';

const cancellation = {
  resourceType: 'Parameters',
  parameter: [
    { name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] },
    {
      name: 'operation',
      part: [
        { name: 'type', valueCode: 'add' },
        { name: 'path', valueString: 'Appointment' },
        { name: 'name', valueString: 'cancelationReason' },
        { name: 'value', valueCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason', code: 'pat' }] } },
      ],
    },
  ],
};

interface Probe {
  at: number;
  ms: number;
  status: number;
}

describeFaults('faults under a 64-client load', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-faults-'));
  const database = `fault_${crypto.randomBytes(5).toString('hex')}`;
  const receiver = new Receiver();
  let admin: Pool;
  let pgRelay: TcpRelay;
  let redisRelay: TcpRelay;
  let server: ChildProcess;
  let origin: string;
  let api: ClientSession;

  beforeAll(async () => {
    const root = new Pool({ connectionString: pgUrl, max: 1 });
    try {
      await root.query(`CREATE DATABASE ${database}`);
    } finally {
      await root.end();
    }
    const dbUrl = new URL(pgUrl as string);
    dbUrl.pathname = `/${database}`;
    admin = new Pool({ connectionString: dbUrl.toString(), max: 2 });
    // An idle connection the server ends (the database dropped at the end, with FORCE) must not
    // become an unhandled 'error' event in the test process.
    admin.on('error', () => undefined);
    pgRelay = await tcpRelay(dbUrl.toString(), 5432);
    redisRelay = await tcpRelay(redisUrl as string, 6379);
    await receiver.start();

    writeDevPki(path.join(dir, 'pki'), createDevPki());
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    server = spawn(process.execPath, [...entryArgs(path.join(__dirname, '..', 'src', 'main.ts')), 'serve'], {
      env: {
        PATH: process.env.PATH,
        HOST: '127.0.0.1',
        PORT: String(port),
        PUBLIC_URL: origin,
        DATA_DIR: path.join(dir, 'data'),
        DATABASE_URL: pgRelay.url(dbUrl.toString()),
        REDIS_URL: redisRelay.url(redisUrl as string),
        DEMO_DATA: 'true',
        CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'),
        REPOSITORY_OWNERS: '1-2-DEV-PRAXIS-P256',
        METRICS_PORT: '0',
        LOG_LEVEL: 'warn',
        // 64 clients from one address and one client_id: the limits are not under test here.
        RATE_LIMIT_PER_IP: '10000000',
        RATE_LIMIT_PER_CLIENT: '10000000',
        RATE_LIMIT_FHIR_PER_CLIENT: '10000000',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    server.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
    server.once('exit', (code) => {
      if (code !== null && code !== 0) process.stderr.write(`terminus serve exited with ${code}: ${stderr}\n`);
    });
    await until('the server answers', async () => (await fetch(`${origin}/readyz`).catch(() => undefined))?.status === 200, 120_000);
    api = await createClient({ server: origin, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'home'), password: PASSWORD, retries: 0 });
  }, 180_000);

  afterAll(async () => {
    api?.close();
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGKILL');
      await exited;
    }
    await receiver.stop();
    await pgRelay?.close();
    await redisRelay?.close();
    await admin?.end();
    const root = new Pool({ connectionString: pgUrl, max: 1 });
    root.on('error', () => undefined);
    await root.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).finally(() => root.end());
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('PostgreSQL and Redis cut and partitioned: 503 within 5 s, back within 5 s, nothing lost or doubled, no exit', async () => {
    const sub = await fhir('POST', 'Subscription', subscription(receiver.url('/faults'), { topic: CANCEL }));
    expect(sub.status).toBe(201);
    const subscriptionId = (sub.json as { id: string }).id;
    await until('the subscription active', async () => ((await fhir('GET', `Subscription/${subscriptionId}`)).json as { status: string }).status === 'active');

    const schedule = 'demo-schedule-weber';
    const search = `Slot?schedule=Schedule/${schedule}&status=free&_count=20`;
    const free = ((await fhir('GET', `Slot?schedule=Schedule/${schedule}&status=free&_count=1000`)).json as Bundle<Slot>).entry!.map((e) => e.resource!);
    expect(free.length).toBeGreaterThan(200);
    // Kept out of the load (whose booking attempts use up slots, answered or not) for the booking after the faults.
    const last = free.shift()!;
    const patient = await fhir('POST', 'Patient', { resourceType: 'Patient', name: [{ family: 'Fault', given: ['Test'] }], gender: 'unknown', birthDate: '1970-01-01' });
    const patientRef = `Patient/${(patient.json as { id: string }).id}`;

    // The load: 64 closed-loop clients searching; one in four requests books the next free slot,
    // and each booking is cancelled again by the next request of the same client (an event).
    const loadStatuses = new Map<number, number>();
    const booked: string[] = [];
    const cancelled: string[] = [];
    let bookingsUnanswered = 0;
    let running = true;
    let loadMaxMs = 0;
    const json = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };
    const workers = Array.from({ length: CLIENTS }, async (_v, n) => {
      let toCancel: string | undefined;
      for (let i = 0; running; i++) {
        const cancel = toCancel;
        toCancel = undefined;
        const slot = !cancel && (n + i) % 4 === 0 ? free.pop() : undefined;
        const started = performance.now();
        let status: number;
        try {
          const res = cancel
            ? await api.fetch(`${origin}/fhir/Appointment/${cancel}`, { method: 'PATCH', headers: json, body: JSON.stringify(cancellation) })
            : slot
              ? await api.fetch(`${origin}/fhir/Appointment/$book`, { method: 'POST', headers: json, body: JSON.stringify(bookParameters({ ...slot, id: slot.id! }, patientRef)) })
              : await api.fetch(`${origin}/fhir/${search}`, { headers: { accept: 'application/fhir+json' } });
          status = res.status;
          const body = (await res.json()) as { resourceType?: string; id?: string };
          if (slot && status === 201 && body.resourceType === 'Appointment') booked.push((toCancel = body.id!));
          if (cancel && status === 200) cancelled.push(cancel);
        } catch (err) {
          status = (err as { status?: number }).status ?? 0;
        }
        if (slot && status >= 500) bookingsUnanswered++;
        loadMaxMs = Math.max(loadMaxMs, performance.now() - started);
        loadStatuses.set(status, (loadStatuses.get(status) ?? 0) + 1);
        if (status === 503) await sleep(100);
      }
    });

    // The probe: one guarded search at a time, every 200 ms.
    const probes: Probe[] = [];
    const t0 = performance.now();
    const prober = (async () => {
      while (running) {
        const at = performance.now() - t0;
        let status: number;
        try {
          const res = await api.fetch(`${origin}/fhir/${search}`, { headers: { accept: 'application/fhir+json' } });
          status = res.status;
          await res.arrayBuffer();
        } catch (err) {
          status = (err as { status?: number }).status ?? 0;
        }
        probes.push({ at, ms: performance.now() - t0 - at, status });
        await sleep(200);
      }
    })();

    const faults: { name: string; from: number; to: number }[] = [];
    const fault = async (name: string, start: () => void, end: () => void | Promise<void>, ms = FAULT_MS) => {
      await sleep(3000);
      const from = performance.now() - t0;
      start();
      await sleep(ms);
      await end();
      faults.push({ name, from, to: performance.now() - t0 });
    };
    try {
      await fault('PostgreSQL cut', () => pgRelay.cut(), () => pgRelay.restore());
      await fault('PostgreSQL partitioned', () => pgRelay.pause(), () => pgRelay.resume(), 15_000);
      await fault('Redis cut', () => redisRelay.cut(), () => redisRelay.restore());
      await fault('Redis partitioned', () => redisRelay.pause(), () => redisRelay.resume());
      await sleep(BOUND_MS + 2000);
    } finally {
      running = false;
      await Promise.all([...workers, prober]);
    }

    // One booking and its cancellation after the faults, retried through any 503 a busy machine
    // gives: the checks below always have a cancellation the subscriber must hear of, however
    // little of the load got through.
    const untilAnswered = async (send: () => Promise<Response>): Promise<Response> => {
      for (let attempt = 0; ; attempt++) {
        const res = await send();
        if (res.status !== 503 || attempt >= 60) return res;
        await res.arrayBuffer();
        await sleep(500);
      }
    };
    const lastBooking = await untilAnswered(() => api.fetch(`${origin}/fhir/Appointment/$book`, { method: 'POST', headers: json, body: JSON.stringify(bookParameters({ ...last, id: last.id! }, patientRef)) }));
    expect(lastBooking.status).toBe(201);
    const lastId = ((await lastBooking.json()) as { id: string }).id;
    booked.push(lastId);
    const lastCancel = await untilAnswered(() => api.fetch(`${origin}/fhir/Appointment/${lastId}`, { method: 'PATCH', headers: json, body: JSON.stringify(cancellation) }));
    expect(lastCancel.status).toBe(200);
    cancelled.push(lastId);

    const summary = {
      load: Object.fromEntries(loadStatuses),
      loadMaxMs: Math.round(loadMaxMs),
      booked: booked.length,
      cancelled: cancelled.length,
      bookingsUnanswered,
      faults: faults.map((f) => {
        // Probes that were under way at some point of the fault.
        const during = probes.filter((p) => p.at < f.to && p.at + p.ms > f.from);
        const back = probes.find((p) => p.at >= f.to && p.status === 200);
        return { name: f.name, probes: during.length, refused: during.filter((p) => p.status === 503).length, slowestMs: Math.round(Math.max(...during.map((p) => p.ms))), backAfterMs: back ? Math.round(back.at + back.ms - f.to) : undefined };
      }),
    };
    process.stdout.write(`faults: ${JSON.stringify(summary)}\n`);

    expect(server.exitCode).toBeNull();
    // Every answer was a success, a taken slot or a 503; never a 500 or a dropped connection.
    expect([...loadStatuses.keys()].filter((s) => ![200, 201, 202, 409, 503].includes(s))).toEqual([]);
    expect(probes.filter((p) => ![200, 503].includes(p.status))).toEqual([]);
    for (const f of summary.faults) {
      // Each fault was noticed, every probe answered within the bound, and service came back within it.
      expect([f.name, f.refused > 0]).toEqual([f.name, true]);
      expect([f.name, f.slowestMs < BOUND_MS]).toEqual([f.name, true]);
      expect([f.name, f.backAfterMs !== undefined && f.backAfterMs < BOUND_MS]).toEqual([f.name, true]);
    }
    expect(booked.length).toBeGreaterThan(0);

    // Nothing lost: every booking answered 201 is stored. Nothing doubled: no slot held twice, and
    // at most the unanswered bookings were stored without their client knowing.
    const appointments = (await admin.query<{ id: string }>("SELECT id FROM resource WHERE resource_type = 'Appointment' AND NOT deleted")).rows.map((r) => r.id);
    expect(booked.filter((id) => !appointments.includes(id))).toEqual([]);
    expect(appointments.length).toBeLessThanOrEqual(booked.length + bookingsUnanswered);
    const twice = await admin.query(
      "SELECT s->>'reference' AS slot FROM resource, jsonb_array_elements(content->'slot') s WHERE resource_type = 'Appointment' AND NOT deleted AND content->>'status' IN ('booked', 'pending') GROUP BY 1 HAVING count(*) > 1",
    );
    expect(twice.rows).toEqual([]);

    // Every cancellation answered 200 is stored; every cancelled Appointment reached the
    // subscriber, each under one event number.
    const stored = (await admin.query<{ id: string }>("SELECT id FROM resource WHERE resource_type = 'Appointment' AND content->>'status' = 'cancelled'")).rows.map((r) => r.id);
    expect(cancelled.filter((id) => !stored.includes(id))).toEqual([]);
    expect(stored.length).toBeGreaterThan(0);
    const eventsOf = () => {
      const numbers = new Map<string, Set<string>>();
      for (const got of receiver.received) {
        if (!got.bundle || !got.path.startsWith('/faults')) continue;
        for (const e of notificationEvents(statusOf(got.bundle))) {
          const id = e.focus.split('/').pop()!;
          numbers.set(id, (numbers.get(id) ?? new Set()).add(e.number));
        }
      }
      return numbers;
    };
    await until('every booking notified', async () => stored.every((id) => eventsOf().has(id)), 120_000).catch(async (err: unknown) => {
      const state = {
        stored: stored.length,
        notified: stored.filter((id) => eventsOf().has(id)).length,
        outboxPending: (await admin.query('SELECT count(*)::int AS n FROM outbox WHERE processed_at IS NULL')).rows[0],
        events: (await admin.query('SELECT count(*)::int AS n, max(event_number)::int AS max FROM subscription_event')).rows[0],
        channel: (await admin.query('SELECT status, events_since_start, delivered_through, failures, next_attempt_at, lease_until, error_code, now() FROM subscription_channel')).rows,
      };
      throw new Error(`${String(err)}: ${JSON.stringify(state)}`);
    });
    expect([...eventsOf()].filter(([, numbers]) => numbers.size > 1)).toEqual([]);
  }, 600_000);

  async function fhir(method: string, pathAndQuery: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    const res = await api.fetch(`${origin}/fhir/${pathAndQuery}`, {
      method,
      headers: { accept: 'application/fhir+json', ...(body ? { 'content-type': 'application/fhir+json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, json: await res.json() };
  }
});

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}
