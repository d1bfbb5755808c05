import request from 'supertest';
import { statementRecorder } from '../helpers/statements';
import { bookingFixture, parameters, proposal, type BookingFixture } from './builders';

/**
 * A booking is a handful of round trips (docs/requirements.md#performance-aims). Every statement
 * the store's driver sends (PostgreSQL or PGlite, whichever this project runs on) is counted while
 * one `$book` runs.
 */
let f: BookingFixture;
const recorder = statementRecorder();
const { sent, senders } = recorder;

/**
 * The statements of the request's transaction: those its connection sent from its BEGIN through
 * its COMMIT, the transaction that wrote the Appointment. Other connections meanwhile (the audit
 * trail linking earlier writes' events in the background, src/audit/audit-trail.ts, which opens
 * transactions of its own) are not the booking's round trips.
 */
function ownTransaction(all: string[]): string[] {
  const flat = all.map((s) => s.replace(/\s+/g, ' '));
  const transactions = flat.flatMap((s, begin) => {
    if (s !== 'BEGIN') return [];
    const mine = flat.filter((_, i) => i >= begin && senders[i] === senders[begin]);
    const commit = mine.indexOf('COMMIT');
    return [commit < 0 ? mine : mine.slice(0, commit + 1)];
  });
  return transactions.find((t) => t.some((s) => s.includes('res AS (INSERT INTO resource'))) ?? transactions[0] ?? flat;
}

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
  // The audit trail links earlier writes in the background, and makes the months' partitions
  // after start (a write before that makes its month itself): neither is this booking's.
  await f.terminus.audit.prepare();
  await f.terminus.audit.linkAll();
  sent.length = 0;
  senders.length = 0;
  const res = await request(f.app).post('/fhir/Appointment/$book').set('content-type', 'application/fhir+json').send(body);
  expect(res.status).toBe(201);
  // The month's audit partition, when the partitions made at start are not there yet for this
  // process (seen on a busy machine), is made by the first write of the month: once a month, not
  // a booking's round trip.
  const statements = ownTransaction(sent).filter((q) => !/audit_event partitions|CREATE TABLE IF NOT EXISTS audit_event_/.test(q));
  expect(statements[0]).toBe('BEGIN');
  expect(statements[statements.length - 1]).toBe('COMMIT');
  if (statements.length > 5) throw new Error(`more than 5 statements:\n${statements.map((q) => q.slice(0, 300)).join('\n---\n')}`);
  // The slot's lock reads its Schedule and the Patient with it: no plain read of its own.
  const lock = statements.filter((s) => s.includes('FOR UPDATE'));
  expect(lock).toHaveLength(1);
  expect(lock[0]).toContain('UNION ALL');
  expect(statements.filter((s) => s.startsWith('SELECT content, deleted, owner, version_id FROM resource'))).toHaveLength(0);
  // The holds are written by the Appointment's own statement, not one of their own.
  const holds = statements.filter((s) => s.includes('booking_slot_hold'));
  expect(holds).toHaveLength(1);
  expect(holds[0]).toContain('res AS (INSERT INTO resource');
  // And they are there: the slot is held by the new appointment.
  const held = await f.ctx.db.query<{ appointment_id: string }>('SELECT appointment_id FROM booking_slot_hold WHERE slot_id = $1', [proposal().slot![0].reference!.split('/')[1]]);
  expect(held.rows).toEqual([{ appointment_id: res.body.id }]);
});

test('a schedule-mode $book of a whole free slot sends at most 6 statements: the slot lookup, then the lock with the participants and the schedule', async () => {
  const { slot: _slot, ...appt } = proposal({ start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z' });
  const body = parameters({ 'appt-resource': appt, schedule: { valueReference: { reference: 'Schedule/Schedule-Read-Example' } } });
  // The audit trail links earlier writes in the background, and makes the months' partitions
  // after start (a write before that makes its month itself): neither is this booking's.
  await f.terminus.audit.prepare();
  await f.terminus.audit.linkAll();
  sent.length = 0;
  senders.length = 0;
  const res = await request(f.app).post('/fhir/Appointment/$book').set('content-type', 'application/fhir+json').send(body);
  expect(res.status).toBe(201);
  expect(res.body.slot).toEqual([{ reference: 'Slot/Slot-Free-By-Schedule-Example' }]);
  const statements = ownTransaction(sent);
  expect(statements[0]).toBe('BEGIN');
  expect(statements[statements.length - 1]).toBe('COMMIT');
  // BEGIN, the lookup, the lock (participants and the Schedule read with it), the slot, the Appointment with its holds, COMMIT.
  expect(statements.length).toBeLessThanOrEqual(6);
  expect(statements.filter((s) => s.startsWith('SELECT content, deleted, owner, version_id FROM resource'))).toHaveLength(0);
  expect(statements.filter((s) => s.includes('FOR UPDATE'))).toHaveLength(1);
});

test('schedule mode: a missing schedule is still 422 not-found, a missing patient still named first', async () => {
  const { slot: _slot, ...appt } = proposal({ start: '2027-03-01T11:05:00Z', end: '2027-03-01T11:55:00Z' });
  const missingSchedule = await request(f.app)
    .post('/fhir/Appointment/$book')
    .set('content-type', 'application/fhir+json')
    .send(parameters({ 'appt-resource': appt, schedule: { valueReference: { reference: 'Schedule/no-such-schedule' } } }));
  expect(missingSchedule.status).toBe(422);
  expect(missingSchedule.body.issue[0]).toMatchObject({ code: 'not-found', expression: ["Parameters.parameter.where(name='schedule')"] });
  const both = await request(f.app)
    .post('/fhir/Appointment/$book')
    .set('content-type', 'application/fhir+json')
    .send(parameters({ 'appt-resource': { ...appt, participant: [{ actor: { reference: 'Patient/no-such-patient' }, status: 'accepted' }] }, schedule: { valueReference: { reference: 'Schedule/no-such-schedule' } } }));
  expect(both.status).toBe(422);
  expect(both.body.issue[0]).toMatchObject({ code: 'not-found', expression: ['Appointment.participant[0].actor'] });
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
    senders.length = 0;
    const res = await request(f.app).put(`/fhir/Patient/${id}`).set('content-type', 'application/fhir+json').send(patient(id, names));
    expect(res.status).toBe(201);
    writes.push(...sent.filter((q) => q.startsWith('WITH res AS (')));
  }
  expect(writes).toHaveLength(2);
  expect(writes[1]).toBe(writes[0]);
});
