import request from 'supertest';
import { sqlState, SqlState } from '../../src/store/db';
import { bookingFixture, FHIR_JSON, freeSlot, put, type BookingFixture } from './builders';

const stores: [string, boolean][] = [['PGlite', true]];
if (process.env.DATABASE_URL) stores.push(['PostgreSQL', false]);

/** The database itself refuses double bookings, whatever code writes (docs/requirements.md#booking-book). */
describe.each(stores)('booking invariants in the database (%s)', (_name, pglite) => {
  let f: BookingFixture;
  beforeAll(async () => {
    f = await bookingFixture({ pglite });
  });
  afterAll(() => f.close());

  const insert = (appointment: string, schedule: string, range: string) =>
    f.ctx.db.query('INSERT INTO booking_reservation (appointment_id, schedule_id, during) VALUES ($1, $2, $3::tstzrange)', [appointment, schedule, range]);
  const stateOf = async (p: Promise<unknown>) => p.then(() => 'ok', (err: unknown) => sqlState(err));

  test('overlapping windows in one schedule: 23P01; adjacent windows and other schedules: fine', async () => {
    expect(await stateOf(insert('x1', 'S', '[2027-09-01 10:00Z,2027-09-01 10:30Z)'))).toBe('ok');
    expect(await stateOf(insert('x2', 'S', '[2027-09-01 10:29Z,2027-09-01 10:45Z)'))).toBe(SqlState.exclusionViolation);
    expect(await stateOf(insert('x3', 'S', '[2027-09-01 10:30Z,2027-09-01 11:00Z)'))).toBe('ok');
    expect(await stateOf(insert('x4', 'T', '[2027-09-01 10:00Z,2027-09-01 10:30Z)'))).toBe('ok');
  });

  test('a slot is held once: 23505', async () => {
    const hold = (a: string) => f.ctx.db.query('INSERT INTO booking_slot_hold (slot_id, appointment_id) VALUES ($1, $2)', ['held-once', a]);
    expect(await stateOf(hold('a1'))).toBe('ok');
    expect(await stateOf(hold('a2'))).toBe(SqlState.uniqueViolation);
  });

  test('every Slot write is mirrored into the lookup table by the trigger', async () => {
    await put(f, freeSlot('mirrored', '2027-09-02T10:00:00Z', '2027-09-02T10:30:00Z'));
    const row = async () => (await f.ctx.db.query<{ status: string }>("SELECT status FROM booking_slot WHERE slot_id = 'mirrored'")).rows[0];
    expect(await row()).toEqual({ status: 'free' });
    const posted = await request(f.app).post('/fhir/Slot').set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...freeSlot('ignored', '2027-09-03T10:00:00Z', '2027-09-03T10:30:00Z'), id: undefined }));
    expect(posted.status).toBe(201);
    const { rows } = await f.ctx.db.query('SELECT 1 FROM booking_slot WHERE slot_id = $1', [posted.body.id]);
    expect(rows).toHaveLength(1);
    expect((await request(f.app).delete('/fhir/Slot/mirrored')).status).toBe(200);
    expect(await row()).toBeUndefined();
  });

  test('the outbox numbers events monotonically and starts them unprocessed', async () => {
    const add = () =>
      f.ctx.db.query<{ id: string }>(
        "INSERT INTO outbox (event_type, resource_type, resource_id, version_id, origin, occurred_at) VALUES ('appointment.updated', 'Appointment', 'a', 2, 'repository', now()) RETURNING id",
      );
    const first = BigInt((await add()).rows[0].id);
    const second = BigInt((await add()).rows[0].id);
    expect(second > first).toBe(true);
    const { rows } = await f.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox WHERE processed_at IS NULL');
    expect(rows[0].n).toBeGreaterThanOrEqual(2);
    expect(await stateOf(f.ctx.db.query("INSERT INTO outbox (event_type, resource_type, resource_id, version_id, origin, occurred_at) VALUES ('not an event name', 'Appointment', 'a', 1, 'repository', now())"))).toBe('23514');
  });
});
