import request from 'supertest';
import { statementRecorder } from '../helpers/statements';
import { bookingFixture, proposal, type BookingFixture } from './builders';

/**
 * Issue 15: a booking is a handful of round trips. Every statement the store's driver sends
 * (PostgreSQL or PGlite, whichever this project runs on) is counted while one `$book` runs.
 */
let f: BookingFixture;
const recorder = statementRecorder();
const { sent } = recorder;

beforeAll(async () => {
  f = await bookingFixture();
  recorder.start();
});

afterAll(async () => {
  recorder.stop();
  await f.close();
});

test('a slot-mode $book of a new appointment sends at most 5 statements, BEGIN and COMMIT included', async () => {
  const body = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: proposal() }] };
  sent.length = 0;
  const res = await request(f.app).post('/fhir/Appointment/$book').set('content-type', 'application/fhir+json').send(body);
  expect(res.status).toBe(201);
  const statements = sent.map((s) => s.replace(/\s+/g, ' '));
  expect(statements[0]).toBe('BEGIN');
  expect(statements[statements.length - 1]).toBe('COMMIT');
  expect(statements.length).toBeLessThanOrEqual(5);
  // The slot's lock reads its Schedule and the Patient with it: no plain read of its own.
  const lock = statements.filter((s) => s.includes('FOR UPDATE'));
  expect(lock).toHaveLength(1);
  expect(lock[0]).toContain('UNION ALL');
  expect(statements.filter((s) => s.startsWith('SELECT content, deleted, owner, version_id FROM resource'))).toHaveLength(0);
  // The holds are written by the Appointment's own statement, not one of their own.
  const holds = statements.filter((s) => s.includes('booking_slot_hold'));
  expect(holds).toHaveLength(1);
  expect(holds[0]).toContain('INSERT INTO resource_version');
  // And they are there: the slot is held by the new appointment.
  const held = await f.ctx.db.query<{ appointment_id: string }>('SELECT appointment_id FROM booking_slot_hold WHERE slot_id = $1', [proposal().slot![0].reference!.split('/')[1]]);
  expect(held.rows).toEqual([{ appointment_id: res.body.id }]);
});

test('a write statement reads the same whatever the number of index rows, so PostgreSQL prepares it once per connection', async () => {
  const patient = (id: string, names: number) => ({
    resourceType: 'Patient',
    id,
    name: Array.from({ length: names }, (_, i) => ({ family: `Family${i}`, given: [`Given${i}`] })),
    identifier: Array.from({ length: names }, (_, i) => ({ system: 'urn:test', value: `${id}-${i}` })),
  });
  const writes: string[] = [];
  for (const [id, names] of [
    ['rt-one-name', 1],
    ['rt-three-names', 3],
  ] as const) {
    sent.length = 0;
    const res = await request(f.app).put(`/fhir/Patient/${id}`).set('content-type', 'application/fhir+json').send(patient(id, names));
    expect(res.status).toBe(201);
    writes.push(...sent.filter((q) => q.includes('INSERT INTO resource_version')));
  }
  expect(writes).toHaveLength(2);
  expect(writes[1]).toBe(writes[0]);
});
