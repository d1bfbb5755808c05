import { Redis } from 'ioredis';
import request from 'supertest';
import type { Appointment } from '@medplum/fhirtypes';
import { composeTerminus } from '../../src/app';
import { createTestContext } from '../helpers/context';
import type { FhirResponse } from '../../src/fhir/request';
import { asFhir, bookingFixture, FHIR_JSON, freeSlot, MANUAL, proposal, put, requestor, schedule, type BookingFixture } from './builders';

const ASYNC_URL = /^http:\/\/localhost:8080\/fhir\/_async\/([0-9a-f-]{36})$/;

/**
 * A poll answer that says "still running": 202 with Retry-After, X-Progress and an
 * OperationOutcome. A finished pending booking answers 202 as well
 * (docs/requirements.md#booking-book), with the Appointment and without the polling headers.
 */
function isRunning(status: number, headers: Record<string, string | undefined>, body: { resourceType?: string } | undefined): boolean {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  if (status !== 202 || lower['x-progress'] === undefined) return false;
  expect(lower['retry-after']).toBe('1');
  expect(body?.resourceType).toBe('OperationOutcome');
  return true;
}

let crashOnce = false;
// Simulates a worker dying after the booking was written but before the job committed.
const crashing = {
  name: 'test: a worker crash mid-booking',
  types: ['Appointment'],
  beforeWrite: async () => {
    if (crashOnce) {
      crashOnce = false;
      throw new Error('simulated worker crash');
    }
  },
};

const backends: [string, boolean][] = [['in-process', false]];
if (process.env.REDIS_URL) backends.push(['BullMQ on Redis', true]);

describe.each(backends)('asynchronous $book (%s)', (_name, useRedis) => {
  let f: BookingFixture;
  let redis: Redis | undefined;
  let n = 0;
  beforeAll(async () => {
    f = await bookingFixture({ interceptors: [crashing] });
    if (useRedis) {
      redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
      f.ctx.redis = redis;
    }
    await f.terminus.jobs.start();
  });
  afterAll(async () => {
    await f.close();
    redis?.disconnect();
  });

  async function newSlot(scheduleId?: string): Promise<{ id: string; start: string; end: string }> {
    n += 1;
    const s = { id: `async-slot-${n}`, start: `2027-08-${String(n).padStart(2, '0')}T09:00:00Z`, end: `2027-08-${String(n).padStart(2, '0')}T09:30:00Z` };
    await put(f, freeSlot(s.id, s.start, s.end, scheduleId));
    return s;
  }
  const on = (s: { id: string; start: string; end: string }) => proposal({ start: s.start, end: s.end, slot: [{ reference: `Slot/${s.id}` }] });
  const kickOff = (body: unknown) =>
    request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).set('Prefer', 'respond-async').send(JSON.stringify(body));

  /** Polls until the job is done (its answer no longer reads as running); returns the final response. */
  async function settle(url: string, app = f.app): Promise<request.Response> {
    const path = new URL(url).pathname;
    for (let i = 0; i < 100; i++) {
      const res = await request(app).get(path);
      if (!isRunning(res.status, res.headers, res.body)) return res;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`job at ${url} did not finish`);
  }

  test('kick-off answers 202 with an absolute Content-Location; the poll ends in 201 with the booked Appointment', async () => {
    const s = await newSlot();
    const res = await kickOff(on(s));
    expect(res.status).toBe(202);
    expect(res.headers['content-location']).toMatch(ASYNC_URL);
    expect(res.body.resourceType).toBe('OperationOutcome');
    const done = await settle(res.headers['content-location']);
    expect(done.status).toBe(201);
    expect(done.body.resourceType).toBe('Appointment');
    expect(done.body.status).toBe('booked');
    expect(done.headers.etag).toBe('W/"1"');
  });

  test('on a manual-confirmation schedule the poll ends in 202 with the pending Appointment and no Retry-After', async () => {
    await put(f, schedule('async-manual', { extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'manuell' }, MANUAL] }));
    const s = await newSlot('async-manual');
    const res = await kickOff(on(s));
    expect(res.status).toBe(202);
    const done = await settle(res.headers['content-location']);
    expect(done.status).toBe(202);
    expect(done.body.resourceType).toBe('Appointment');
    expect(done.body.status).toBe('pending');
    expect(done.headers['retry-after']).toBeUndefined();
    expect(done.headers['x-progress']).toBeUndefined();
    // Polling again gives the same finished answer.
    const again = await request(f.app).get(new URL(res.headers['content-location']).pathname);
    expect([again.status, again.body.status, again.headers['retry-after']]).toEqual([202, 'pending', undefined]);
  });

  test('a failing booking ends in its own status: 409 with the OperationOutcome', async () => {
    const s = await newSlot();
    expect((await request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(on(s)))).status).toBe(201);
    const res = await kickOff(on(s));
    expect(res.status).toBe(202);
    const done = await settle(res.headers['content-location']);
    expect(done.status).toBe(409);
    expect(done.body.issue[0].code).toBe('conflict');
  });

  test('input faults are answered at kick-off (400), no job is made', async () => {
    const { start: _s, end: _e, ...incomplete } = proposal();
    const res = await kickOff(incomplete);
    expect(res.status).toBe(400);
    expect(res.body.issue[0].code).toBe('required');
    expect(res.headers['content-location']).toBeUndefined();
  });

  test('a second app instance on the same database answers the poll', async () => {
    const s = await newSlot();
    const res = await kickOff(on(s));
    const other = composeTerminus(await createTestContext({ db: f.ctx.db }));
    const done = await settle(res.headers['content-location'], other.app).finally(() => other.stop());
    expect(done.status).toBe(201);
    expect(done.body.status).toBe('booked');
  });

  test('an unknown id answers 404', async () => {
    const res = await request(f.app).get('/fhir/_async/7b0a4e1c-0000-4000-8000-000000000000');
    expect(res.status).toBe(404);
    expect(res.body.issue[0].code).toBe('not-found');
  });

  test('DELETE cancels a queued job: 202, then the poll answers 404 and nothing is booked', async () => {
    const s = await newSlot();
    const id = '11111111-2222-4333-8444-' + String(n).padStart(12, '0');
    // A job recorded by some replica and not yet taken by a worker.
    await f.ctx.db.query(
      `INSERT INTO async_job (id, kind, owner, state, payload, max_attempts, created_at, updated_at, expires_at)
       VALUES ($1, 'fhir-request', NULL, 'queued', $2, 3, now(), now(), now() + interval '1 day')`,
      [id, JSON.stringify({ method: 'POST', path: ['Appointment', '$book'], query: [], headers: {}, body: on(s) })],
    );
    const del = await request(f.app).delete(`/fhir/_async/${id}`);
    expect(del.status).toBe(202);
    expect((await request(f.app).get(`/fhir/_async/${id}`)).status).toBe(404);
    await f.terminus.jobs.sweep();
    expect((await request(f.app).get(`/fhir/Slot/${s.id}`)).body.status).toBe('free');
  });

  test('DELETE of a running job answers 409', async () => {
    const id = '11111111-2222-4333-8555-' + String(n).padStart(12, '0');
    await f.ctx.db.query(
      `INSERT INTO async_job (id, kind, owner, state, payload, max_attempts, lease_until, created_at, updated_at, expires_at)
       VALUES ($1, 'fhir-request', NULL, 'running', '{}', 3, now() + interval '1 hour', now(), now(), now() + interval '1 day')`,
      [id],
    );
    const del = await request(f.app).delete(`/fhir/_async/${id}`);
    expect(del.status).toBe(409);
    expect(del.body.issue[0].code).toBe('conflict');
  });

  test('results are kept 24 hours', async () => {
    const s = await newSlot();
    const res = await kickOff(on(s));
    expect((await settle(res.headers['content-location'])).status).toBe(201);
    f.ctx.clock.advance(24 * 60 * 60 * 1000 + 1000);
    try {
      expect((await request(f.app).get(new URL(res.headers['content-location']).pathname)).status).toBe(404);
    } finally {
      f.ctx.clock.advance(-(24 * 60 * 60 * 1000 + 1000));
    }
  });

  test('another institution cannot poll the job (404)', async () => {
    const s = await newSlot();
    const kick = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(s), headers: { prefer: 'respond-async' } }, requestor('A'));
    expect(kick.status).toBe(202);
    const id = ASYNC_URL.exec(kick.headers!['Content-Location'])![1];
    expect((await asFhir(f, { method: 'GET', path: ['_async', id] }, requestor('B'))).status).toBe(404);
    let poll: FhirResponse;
    for (let i = 0; ; i++) {
      poll = await asFhir(f, { method: 'GET', path: ['_async', id] }, requestor('A'));
      if (!isRunning(poll.status, poll.headers ?? {}, poll.body as { resourceType?: string }) || i === 100) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(poll.status).toBe(201);
  });

  test('a worker crash mid-job does not double-book: the attempt rolls back and the retry books once', async () => {
    const s = await newSlot();
    crashOnce = true;
    const res = await kickOff(on(s));
    const done = await settle(res.headers['content-location']);
    expect(done.status).toBe(201);
    const id = ASYNC_URL.exec(res.headers['content-location'])![1];
    const { rows } = await f.ctx.db.query<{ attempts: number }>('SELECT attempts FROM async_job WHERE id = $1', [id]);
    expect(rows[0].attempts).toBe(2);
    const booked = await request(f.app).get(`/fhir/Appointment?slot=${s.id}`);
    expect(booked.body.total).toBe(1);
  });

  test('a job abandoned by a dead worker (lease passed) is run again by the sweep', async () => {
    const s = await newSlot();
    const id = '11111111-2222-4333-8666-' + String(n).padStart(12, '0');
    await f.ctx.db.query(
      `INSERT INTO async_job (id, kind, owner, state, payload, attempts, max_attempts, lease_until, created_at, updated_at, expires_at)
       VALUES ($1, 'fhir-request', NULL, 'running', $2, 1, 3, now() - interval '1 minute', now(), now(), now() + interval '1 day')`,
      [id, JSON.stringify({ method: 'POST', path: ['Appointment', '$book'], query: [], headers: {}, body: on(s) })],
    );
    expect(await f.terminus.jobs.sweep()).toContain(id);
    const done = await settle(`http://localhost:8080/fhir/_async/${id}`);
    expect(done.status).toBe(201);
    expect((done.body as Appointment).slot).toEqual([{ reference: `Slot/${s.id}` }]);
  });

});
