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

test('a slot-mode $book of a new appointment sends at most 7 statements, BEGIN and COMMIT included', async () => {
  const body = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: proposal() }] };
  sent.length = 0;
  const res = await request(f.app).post('/fhir/Appointment/$book').set('content-type', 'application/fhir+json').send(body);
  expect(res.status).toBe(201);
  const statements = sent.map((s) => s.replace(/\s+/g, ' '));
  expect(statements[0]).toBe('BEGIN');
  expect(statements[statements.length - 1]).toBe('COMMIT');
  expect(statements.length).toBeLessThanOrEqual(7);
  // The booking's hold rows are one statement, and the new Appointment is not read before its insert.
  expect(statements.filter((s) => s.includes('booking_slot_hold'))).toHaveLength(1);
  expect(statements.filter((s) => s.includes('FOR UPDATE'))).toHaveLength(1); // the slot
  // The slot's Schedule comes with the slot's lock; the one plain read left is the Patient's.
  expect(statements.filter((s) => s.startsWith('SELECT content, deleted, owner, version_id FROM resource'))).toHaveLength(1);
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
