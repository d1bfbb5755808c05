import request from 'supertest';
import type { Appointment, Slot } from '@medplum/fhirtypes';
import { fromXml, toXml } from '../../src/model/formats';
import { bookingFixture, FHIR_JSON, freeSlot, parameters, proposal, put, type BookingFixture } from './builders';

const book = (f: BookingFixture, body: unknown) =>
  request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(body));

describe('Appointment/$book (ISiK Stufe 5 S5-7, S5-8)', () => {
  let f: BookingFixture;
  beforeAll(async () => {
    f = await bookingFixture();
  });
  afterAll(() => f.close());

  test('S5-7 (a) the CapabilityStatement offers book on Appointment', async () => {
    const res = await request(f.app).get('/fhir/metadata');
    expect(res.status).toBe(200);
    const appointment = res.body.rest[0].resource.find((r: { type: string }) => r.type === 'Appointment');
    expect(appointment.operation).toContainEqual({ name: 'book', definition: 'https://gematik.de/fhir/isik/OperationDefinition/AppointmentBook' });
    expect(appointment.interaction).toContainEqual({ code: 'patch' });
  });

  test('S5-7 (b) a bare Appointment on a free slot is booked: 201, booked, slot busy', async () => {
    const res = await book(f, { ...proposal(), id: 'Appointment-Book-Fixture-With-Specialty' });
    expect(res.status).toBe(201);
    expect(res.body.resourceType).toBe('Appointment');
    expect(res.body.id).toBe('Appointment-Book-Fixture-With-Specialty');
    expect(res.body.status).toBe('booked');
    expect(res.body.slot).toEqual([{ reference: 'Slot/Slot-Free-Example' }]);
    const slot = await request(f.app).get('/fhir/Slot/Slot-Free-Example');
    expect(slot.body.status).toBe('busy');
  });

  test('S5-7 (b) again, as a second run of the suite does: the same id re-books in place (201, version 2)', async () => {
    const res = await book(f, { ...proposal(), id: 'Appointment-Book-Fixture-With-Specialty' });
    expect(res.status).toBe(201);
    expect([res.body.id, res.body.meta.versionId, res.body.status]).toEqual(['Appointment-Book-Fixture-With-Specialty', '2', 'booked']);
  });

  test('S5-7 (c) an appointment without start and end answers 400 with an OperationOutcome', async () => {
    const { start: _s, end: _e, meta: _m, ...incomplete } = proposal();
    const res = await book(f, incomplete);
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue.map((i: { code: string }) => i.code)).toEqual(['required', 'required']);
    expect(res.body.issue[0].expression).toEqual(['Appointment.start']);
  });

  test('S5-8 Parameters with a schedule and no slot: the repository finds and fills the slot', async () => {
    const { slot: _slot, ...appt } = proposal({ start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z' });
    const res = await book(f, parameters({ 'appt-resource': { ...appt, id: 'Appointment-Book-By-Schedule-Fixture' }, schedule: { valueReference: { reference: 'Schedule/Schedule-Read-Example' } } }));
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('booked');
    expect(res.body.slot).toEqual([{ reference: 'Slot/Slot-Free-By-Schedule-Example' }]);
  });

  test('a free slot whose time another appointment of the schedule already holds: 409 conflict on Appointment.start, from the hold written with the appointment', async () => {
    // Overlapping slots of one calendar (bad calendar data): the second booking passes every slot
    // check; the schedule's reservation, written by the Appointment's own statement, refuses it.
    await put(f, freeSlot('held-a', '2027-02-03T10:00:00Z', '2027-02-03T11:00:00Z'), freeSlot('held-b', '2027-02-03T10:30:00Z', '2027-02-03T11:30:00Z'));
    const first = await book(f, proposal({ start: '2027-02-03T10:00:00Z', end: '2027-02-03T10:45:00Z', slot: [{ reference: 'Slot/held-a' }] }));
    expect(first.status).toBe(201);
    const second = await book(f, proposal({ start: '2027-02-03T10:40:00Z', end: '2027-02-03T11:10:00Z', slot: [{ reference: 'Slot/held-b' }] }));
    expect(second.status).toBe(409);
    expect(second.body.issue[0]).toMatchObject({ code: 'conflict', expression: ['Appointment.start'] });
    // Nothing of the refused booking stays: its slot is still free.
    expect(((await request(f.app).get('/fhir/Slot/held-b')).body as Slot).status).toBe('free');
  });

  test('schedule mode cuts a longer free slot: the booked part is busy, the rest stays free', async () => {
    await put(f, freeSlot('long-free', '2027-02-01T08:00:00Z', '2027-02-01T12:00:00Z'));
    const { slot: _slot, ...appt } = proposal({ start: '2027-02-01T09:00:00Z', end: '2027-02-01T09:30:00Z' });
    const res = await book(f, parameters({ 'appt-resource': appt, schedule: { valueReference: { reference: 'Schedule/Schedule-Read-Example' } } }));
    expect(res.status).toBe(201);
    expect(res.body.slot).toEqual([{ reference: 'Slot/long-free' }]);
    const busy = (await request(f.app).get('/fhir/Slot/long-free')).body as Slot;
    expect([busy.status, busy.start, busy.end]).toEqual(['busy', '2027-02-01T09:00:00Z', '2027-02-01T09:30:00Z']);
    const free = await request(f.app).get('/fhir/Slot?schedule=Schedule-Read-Example&status=free&start=2027-02-01');
    const windows = (free.body.entry as { resource: Slot }[]).map((e) => `${e.resource.start}/${e.resource.end}`).sort();
    expect(windows).toEqual(['2027-02-01T08:00:00Z/2027-02-01T09:00:00Z', '2027-02-01T09:30:00Z/2027-02-01T12:00:00Z']);
    // The same time again: taken.
    const again = await book(f, parameters({ 'appt-resource': appt, schedule: { valueReference: { reference: 'Schedule/Schedule-Read-Example' } } }));
    expect(again.status).toBe(409);
    expect(again.body.issue[0].code).toBe('conflict');
  });

  test('schedule mode finds a slot of 20 hours that began the evening before, and one of three days (the two ways into booking_slot)', async () => {
    await put(f, freeSlot('overnight', '2027-03-10T18:00:00Z', '2027-03-11T14:00:00Z'));
    await put(f, freeSlot('three-days', '2027-03-05T08:00:00Z', '2027-03-08T08:00:00Z'));
    const { rows } = await f.ctx.db.query<{ slot_id: string; short: boolean }>("SELECT slot_id, short FROM booking_slot WHERE slot_id IN ('overnight', 'three-days') ORDER BY slot_id");
    expect(rows).toEqual([
      { slot_id: 'overnight', short: true },
      { slot_id: 'three-days', short: false },
    ]);
    for (const [slot, start, end] of [
      ['overnight', '2027-03-11T12:00:00Z', '2027-03-11T12:30:00Z'],
      ['three-days', '2027-03-07T10:00:00Z', '2027-03-07T10:30:00Z'],
    ]) {
      const { slot: _slot, ...appt } = proposal({ start, end });
      const res = await book(f, parameters({ 'appt-resource': appt, schedule: { valueReference: { reference: 'Schedule/Schedule-Read-Example' } } }));
      expect([slot, res.status, res.body.slot]).toEqual([slot, 201, [{ reference: `Slot/${slot}` }]]);
    }
  });

  test('FHIR XML in and out: 201 with the booked Appointment as XML', async () => {
    await put(f, freeSlot('xml-slot', '2027-02-02T10:00:00Z', '2027-02-02T10:30:00Z'));
    const body = toXml(proposal({ start: '2027-02-02T10:00:00Z', end: '2027-02-02T10:30:00Z', slot: [{ reference: 'Slot/xml-slot' }] }));
    const res = await request(f.app).post('/fhir/Appointment/$book').set('Content-Type', 'application/fhir+xml').set('Accept', 'application/fhir+xml').send(body);
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+xml/);
    const appointment = fromXml(res.text) as Appointment;
    expect([appointment.resourceType, appointment.status]).toEqual(['Appointment', 'booked']);
  });

  test('a taken slot answers 409 conflict', async () => {
    const res = await book(f, proposal());
    expect(res.status).toBe(409);
    expect(res.body.issue[0].code).toBe('conflict');
    const appts = await request(f.app).get('/fhir/Appointment?slot=Slot-Free-Example&status=booked');
    expect((appts.body.entry as { resource: Appointment }[]).map((e) => e.resource.id)).toEqual(['Appointment-Book-Fixture-With-Specialty']);
  });
});
