import { PGlite } from '@electric-sql/pglite';
import { Client } from 'pg';
import request from 'supertest';
import { bookingFixture, proposal, type BookingFixture } from './builders';

/**
 * Issue 15: a booking is a handful of round trips. Every statement the store's driver sends
 * (PostgreSQL or PGlite, whichever this project runs on) is counted while one `$book` runs.
 */
let f: BookingFixture;
const sent: string[] = [];
const restore: (() => void)[] = [];

function countCalls(proto: Record<string, unknown>, method: string): void {
  const original = proto[method] as (...args: unknown[]) => unknown;
  proto[method] = function (this: unknown, q: unknown, ...rest: unknown[]) {
    sent.push(typeof q === 'string' ? q : String((q as { text?: string }).text));
    return original.call(this, q, ...rest);
  };
  restore.push(() => (proto[method] = original));
}

beforeAll(async () => {
  f = await bookingFixture();
  countCalls(Client.prototype as unknown as Record<string, unknown>, 'query');
  countCalls(PGlite.prototype as unknown as Record<string, unknown>, 'query');
  countCalls(PGlite.prototype as unknown as Record<string, unknown>, 'exec');
});

afterAll(async () => {
  for (const undo of restore) undo();
  await f.close();
});

test('a slot-mode $book of a new appointment sends at most 8 statements, BEGIN and COMMIT included', async () => {
  const body = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: proposal() }] };
  sent.length = 0;
  const res = await request(f.app).post('/fhir/Appointment/$book').set('content-type', 'application/fhir+json').send(body);
  expect(res.status).toBe(201);
  const statements = sent.map((s) => s.replace(/\s+/g, ' '));
  expect(statements[0]).toBe('BEGIN');
  expect(statements[statements.length - 1]).toBe('COMMIT');
  expect(statements.length).toBeLessThanOrEqual(8);
  // The booking's hold rows are one statement, and the new Appointment is not read before its insert.
  expect(statements.filter((s) => s.includes('booking_slot_hold'))).toHaveLength(1);
  expect(statements.filter((s) => s.includes('FOR UPDATE'))).toHaveLength(1); // the slot
});
