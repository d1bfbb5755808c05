import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { bookingFixture, FHIR_JSON, freeSlot, parameters, patient, proposal, put, type BookingFixture } from './builders';

const CLIENTS = 50;

/**
 * No double booking under any concurrency, decided by the database
 * (docs/requirements.md#booking-book). 50 clients race for one free slot over real HTTP
 * connections: exactly one 201, 49 x 409, one booked Appointment. Runs on PGlite always and on
 * PostgreSQL when DATABASE_URL is set.
 */
const stores: [string, boolean][] = [['PGlite', true]];
if (process.env.DATABASE_URL) stores.push(['PostgreSQL', false]);

describe.each(stores)('50 concurrent $book on one slot (%s)', (_name, pglite) => {
  let f: BookingFixture;
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    f = await bookingFixture({ pglite });
    server = http.createServer(f.app).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await f.close();
  });

  test('exactly one 201, 49 x 409, one booked Appointment in the store', async () => {
    await put(f, freeSlot('race-slot', '2027-03-01T10:00:00Z', '2027-03-01T10:30:00Z'));
    const body = JSON.stringify(proposal({ start: '2027-03-01T10:00:00Z', end: '2027-03-01T10:30:00Z', slot: [{ reference: 'Slot/race-slot' }] }));
    const results = await Promise.all(
      Array.from({ length: CLIENTS }, () =>
        fetch(`${base}/fhir/Appointment/$book`, { method: 'POST', headers: { 'Content-Type': FHIR_JSON }, body }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as { issue?: { code: string }[] },
        })),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(CLIENTS - 1);
    expect(results.filter((r) => r.status === 409).every((r) => r.body.issue?.[0].code === 'conflict')).toBe(true);
    const stored = await request(f.app).get('/fhir/Appointment?slot=race-slot');
    expect(stored.body.total).toBe(1);
    expect(stored.body.entry[0].resource.status).toBe('booked');
    const { rows } = await f.ctx.db.query<{ n: number }>("SELECT count(*)::int AS n FROM booking_slot_hold WHERE slot_id = 'race-slot'");
    expect(rows[0].n).toBe(1);
  });

  test('overlapping times in one schedule through different slots: one wins, the rest 409', async () => {
    // Two slots of the same schedule that overlap (bad calendar data): the schedule's time
    // window is still booked once, by the exclusion constraint.
    await put(
      f,
      freeSlot('overlap-a', '2027-03-02T10:00:00Z', '2027-03-02T11:00:00Z'),
      freeSlot('overlap-b', '2027-03-02T10:30:00Z', '2027-03-02T11:30:00Z'),
    );
    const bodies = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify(
        i % 2
          ? proposal({ start: '2027-03-02T10:00:00Z', end: '2027-03-02T10:45:00Z', slot: [{ reference: 'Slot/overlap-a' }] })
          : proposal({ start: '2027-03-02T10:40:00Z', end: '2027-03-02T11:10:00Z', slot: [{ reference: 'Slot/overlap-b' }] }),
      ),
    );
    const statuses = await Promise.all(
      bodies.map((body) => fetch(`${base}/fhir/Appointment/$book`, { method: 'POST', headers: { 'Content-Type': FHIR_JSON }, body }).then((r) => r.status)),
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
  });

  test('ten bookings at once bringing the same new patient create it once', async () => {
    const n = 10;
    const slots = Array.from({ length: n }, (_, i) => freeSlot(`same-patient-${i}`, `2027-03-03T${String(8 + i).padStart(2, '0')}:00:00Z`, `2027-03-03T${String(8 + i).padStart(2, '0')}:30:00Z`));
    await put(f, ...slots);
    const newcomer = patient('client-side', { identifier: [{ system: 'urn:test:race', value: 'Z999999999' }] });
    const bodies = slots.map((slot) =>
      JSON.stringify(
        parameters({
          'appt-resource': proposal({ start: slot.start, end: slot.end, slot: [{ reference: `Slot/${slot.id}` }], participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }] }),
          patient: newcomer,
        }),
      ),
    );
    const booked = await Promise.all(
      bodies.map((body) =>
        fetch(`${base}/fhir/Appointment/$book`, { method: 'POST', headers: { 'Content-Type': FHIR_JSON }, body }).then(async (r) => ({ status: r.status, body: (await r.json()) as { participant?: { actor?: { reference?: string } }[] } })),
      ),
    );
    expect(booked.map((b) => b.status)).toEqual(Array(n).fill(201));
    const found = await request(f.app).get('/fhir/Patient?identifier=urn:test:race|Z999999999');
    expect(found.body.total).toBe(1);
    const patientRef = `Patient/${found.body.entry[0].resource.id}`;
    expect(booked.every((b) => b.body.participant?.some((p) => p.actor?.reference === patientRef))).toBe(true);
  });
});
