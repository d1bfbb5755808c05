import request from 'supertest';
import type { Appointment, Patient, QuestionnaireResponse, RelatedPerson } from '@medplum/fhirtypes';
import { asFhir, bookingFixture, FHIR_JSON, freeSlot, owner, parameters, patient, proposal, put, requestor, type BookingFixture } from './builders';

const REPLACES = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces';

let n = 0;
/** A new free slot on its own day: [id, start, end]. */
async function newSlot(f: BookingFixture): Promise<{ id: string; start: string; end: string }> {
  n += 1;
  const date = `2027-07-${String(n).padStart(2, '0')}`;
  const s = { id: `flow-slot-${n}`, start: `${date}T09:00:00Z`, end: `${date}T09:20:00Z` };
  await put(f, freeSlot(s.id, s.start, s.end));
  return s;
}

const on = (s: { id: string; start: string; end: string }, extra: Partial<Appointment> = {}) =>
  proposal({ start: s.start, end: s.end, slot: [{ reference: `Slot/${s.id}` }], ...extra });

const post = (f: BookingFixture, body: unknown) => request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(body));
const slotStatus = async (f: BookingFixture, id: string) => (await request(f.app).get(`/fhir/Slot/${id}`)).body.status as string;
const read = async (f: BookingFixture, type: string, id: string) => (await request(f.app).get(`/fhir/${type}/${id}`)).body;
const events = async (f: BookingFixture, id: string) =>
  (await f.ctx.db.query<{ event_type: string; version_id: number }>('SELECT event_type, version_id FROM outbox WHERE resource_id = $1 ORDER BY id', [id])).rows;

describe('$book flows', () => {
  let f: BookingFixture;
  beforeAll(async () => {
    f = await bookingFixture();
  });
  afterAll(() => f.close());

  describe('re-book in place (same id)', () => {
    test('moves the appointment: same id, new version, old slot free, new slot busy, appointment.updated', async () => {
      const a = await newSlot(f);
      const b = await newSlot(f);
      expect((await post(f, { ...on(a), id: 'rebook-1' })).status).toBe(201);
      const res = await post(f, { ...on(b), id: 'rebook-1' });
      expect(res.status).toBe(201);
      expect([res.body.id, res.body.meta.versionId, res.body.start]).toEqual(['rebook-1', '2', b.start]);
      expect([await slotStatus(f, a.id), await slotStatus(f, b.id)]).toEqual(['free', 'busy']);
      expect(await events(f, 'rebook-1')).toEqual([{ event_type: 'appointment.updated', version_id: 2 }]);
    });

    test('a failed re-book leaves the appointment and its slot as they were', async () => {
      const a = await newSlot(f);
      const b = await newSlot(f);
      expect((await post(f, { ...on(a), id: 'rebook-2' })).status).toBe(201);
      expect((await post(f, on(b))).status).toBe(201);
      const res = await post(f, { ...on(b), id: 'rebook-2' });
      expect(res.status).toBe(409);
      expect(res.body.issue[0].code).toBe('conflict');
      const current = await read(f, 'Appointment', 'rebook-2');
      expect([current.meta.versionId, current.status, current.start]).toEqual(['1', 'booked', a.start]);
      expect(await slotStatus(f, a.id)).toBe('busy');
    });

    test('re-booking the same slot at the same time succeeds (its own hold is released first)', async () => {
      const a = await newSlot(f);
      expect((await post(f, { ...on(a), id: 'rebook-3' })).status).toBe(201);
      const res = await post(f, { ...on(a, { comment: 'zweiter Versuch' }), id: 'rebook-3' });
      expect(res.status).toBe(201);
      expect(res.body.meta.versionId).toBe('2');
      expect(await slotStatus(f, a.id)).toBe('busy');
    });
  });

  describe('cancelled-appt-id (reschedule)', () => {
    test.each([
      ['valueUri with a bare id', (id: string) => ({ valueUri: id })],
      ['valueString with Appointment/id', (id: string) => ({ valueString: `Appointment/${id}` })],
      ['valueUri with an absolute URL', (id: string) => ({ valueUri: `http://localhost:8080/fhir/Appointment/${id}` })],
    ])('%s: old cancelled and its slot freed, new one replaces it', async (_form, value) => {
      const a = await newSlot(f);
      const b = await newSlot(f);
      const old = (await post(f, on(a))).body as Appointment;
      const res = await post(f, parameters({ 'appt-resource': on(b), 'cancelled-appt-id': value(old.id!) }));
      expect(res.status).toBe(201);
      expect(res.body.extension).toContainEqual({ url: REPLACES, valueReference: { reference: `Appointment/${old.id}` } });
      expect((await read(f, 'Appointment', old.id!)).status).toBe('cancelled');
      expect([await slotStatus(f, a.id), await slotStatus(f, b.id)]).toEqual(['free', 'busy']);
      expect(await events(f, old.id!)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2 }]);
    });

    test('rescheduling into the slot the old appointment held works', async () => {
      const a = await newSlot(f);
      const old = (await post(f, on(a))).body as Appointment;
      const res = await post(f, parameters({ 'appt-resource': on(a, { comment: 'neu' }), 'cancelled-appt-id': { valueString: old.id } }));
      expect(res.status).toBe(201);
      expect((await read(f, 'Appointment', old.id!)).status).toBe('cancelled');
    });

    test('when the new booking fails the old appointment stays untouched', async () => {
      const a = await newSlot(f);
      const b = await newSlot(f);
      const old = (await post(f, on(a))).body as Appointment;
      expect((await post(f, on(b))).status).toBe(201);
      const res = await post(f, parameters({ 'appt-resource': on(b), 'cancelled-appt-id': { valueString: old.id } }));
      expect(res.status).toBe(409);
      const current = await read(f, 'Appointment', old.id!);
      expect([current.status, current.meta.versionId]).toEqual(['booked', '1']);
      expect(await slotStatus(f, a.id)).toBe('busy');
      expect(await events(f, old.id!)).toEqual([]);
    });
  });

  describe('patient, related person and submitted information', () => {
    const given = (): Patient => patient('client-side-id', { identifier: [{ system: 'urn:oid:1.2.276.0.76.4.8', value: 'A123456789' }], name: [{ family: 'Neu', given: ['Nora'] }] });

    test('the patient parameter creates the patient tagged external and links it', async () => {
      const s = await newSlot(f);
      const res = await post(f, parameters({ 'appt-resource': on(s, { participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }] }), patient: given() }));
      expect(res.status).toBe(201);
      const ref = (res.body as Appointment).participant!.find((p) => p.actor?.reference?.startsWith('Patient/'))!.actor!.reference!;
      const stored = (await read(f, 'Patient', ref.split('/')[1])) as Patient;
      expect(stored.meta!.tag).toContainEqual({ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' });
      expect(stored.name![0].family).toBe('Neu');
    });

    test('a second booking with the same identifier reuses the patient', async () => {
      const s = await newSlot(f);
      const res = await post(f, parameters({ 'appt-resource': on(s, { participant: [{ actor: { reference: 'Patient/client-side-id' }, status: 'accepted' }] }), patient: given() }));
      expect(res.status).toBe(201);
      const found = await request(f.app).get('/fhir/Patient?identifier=urn:oid:1.2.276.0.76.4.8|A123456789');
      expect(found.body.total).toBe(1);
      expect(res.body.participant[0].actor.reference).toBe(`Patient/${found.body.entry[0].resource.id}`);
    });

    test('patientSubmittedInformation and related-person are stored and linked in supportingInformation', async () => {
      const s = await newSlot(f);
      const qr: QuestionnaireResponse = {
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire: 'https://example.org/Questionnaire/anamnese',
        text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Kopfschmerzen seit 3 Tagen</div>' },
      };
      const rp: RelatedPerson = { resourceType: 'RelatedPerson', patient: { reference: 'Patient/Patient-Read-Example' }, name: [{ family: 'Muster', given: ['Maria'] }] };
      const res = await post(f, parameters({ 'appt-resource': on(s), patientSubmittedInformation: qr, 'related-person': rp }));
      expect(res.status).toBe(201);
      const refs = (res.body as Appointment).supportingInformation!.map((r) => r.reference!);
      expect(refs.map((r) => r.split('/')[0]).sort()).toEqual(['QuestionnaireResponse', 'RelatedPerson']);
      const storedQr = await read(f, 'QuestionnaireResponse', refs.find((r) => r.startsWith('QuestionnaireResponse'))!.split('/')[1]);
      expect(storedQr.subject).toEqual({ reference: 'Patient/Patient-Read-Example' });
    });

    test('a provisional patient deactivated later takes its future appointments with it', async () => {
      const s = await newSlot(f);
      const res = await post(f, parameters({ 'appt-resource': on(s, { participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }] }), patient: patient('tmp', { identifier: [{ system: 'urn:test', value: 'provisional-1' }] }) }));
      expect(res.status).toBe(201);
      const ref = (res.body as Appointment).participant!.find((p) => p.actor?.reference?.startsWith('Patient/'))!.actor!.reference!;
      const deactivate = await request(f.app)
        .patch(`/fhir/${ref}`)
        .set('Content-Type', FHIR_JSON)
        .send(JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.active' }, { name: 'value', valueBoolean: false }] }] }));
      expect(deactivate.status).toBe(200);
      expect((await read(f, 'Appointment', res.body.id)).status).toBe('cancelled');
      expect(await slotStatus(f, s.id)).toBe('free');
      expect(await events(f, res.body.id)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2 }]);
      // And a new booking for that patient is refused.
      const again = await post(f, on(await newSlot(f), { participant: [{ actor: { reference: ref }, status: 'accepted' }] }));
      expect([again.status, again.body.issue[0].code]).toEqual([422, 'business-rule']);
    });
  });

  describe('other routes cannot bypass the booking rules', () => {
    test('a requestor cannot create a booked appointment by POST (422 business-rule)', async () => {
      const s = await newSlot(f);
      const res = await asFhir(f, { method: 'POST', path: ['Appointment'], body: { ...on(s), status: 'booked' } }, requestor());
      expect(res.status).toBe(422);
      expect((res.body as { issue: { code: string }[] }).issue[0].code).toBe('business-rule');
      expect(await slotStatus(f, s.id)).toBe('free');
    });

    test('a requestor cannot re-activate a cancelled appointment by PUT (422 business-rule)', async () => {
      const s = await newSlot(f);
      const booked = (await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(s) }, requestor())).body as Appointment;
      await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.id!], body: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] } }, requestor());
      const current = (await read(f, 'Appointment', booked.id!)) as Appointment;
      const res = await asFhir(f, { method: 'PUT', path: ['Appointment', booked.id!], body: { ...current, status: 'booked' } }, requestor());
      expect(res.status).toBe(422);
      expect((res.body as { issue: { code: string }[] }).issue[0].code).toBe('business-rule');
    });

    test('a held slot can be neither freed nor deleted (409), a PUT of a booked appointment by an owner holds its slot', async () => {
      const s = await newSlot(f);
      const appt = (await post(f, on(s))).body as Appointment;
      const slot = await read(f, 'Slot', s.id);
      const freed = await request(f.app).put(`/fhir/Slot/${s.id}`).set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...slot, status: 'free' }));
      expect([freed.status, freed.body.issue[0].code]).toEqual([409, 'conflict']);
      const deleted = await request(f.app).delete(`/fhir/Slot/${s.id}`);
      expect([deleted.status, deleted.body.issue[0].code]).toEqual([409, 'conflict']);
      // Owner imports a second booked appointment on the same time: the reservation refuses it.
      const { id: _id, meta: _meta, ...copy } = appt;
      const dup = await request(f.app).put('/fhir/Appointment/imported-dup').set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...copy, id: 'imported-dup' }));
      expect([dup.status, dup.body.issue?.[0]?.code]).toEqual([409, 'conflict']);
    });

    test('an owner deleting a booked appointment frees its slot and records appointment.cancelled', async () => {
      const s = await newSlot(f);
      const appt = (await post(f, on(s))).body as Appointment;
      expect((await request(f.app).delete(`/fhir/Appointment/${appt.id}`)).status).toBe(200);
      expect(await slotStatus(f, s.id)).toBe('free');
      expect(await events(f, appt.id!)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2 }]);
    });

    test('a requestor POST of a proposed appointment for a missing patient is refused (422 not-found)', async () => {
      const res = await asFhir(f, { method: 'POST', path: ['Appointment'], body: { ...proposal(), participant: [{ actor: { reference: 'Patient/nobody' }, status: 'accepted' }] } }, requestor());
      expect(res.status).toBe(422);
      expect((res.body as { issue: { code: string }[] }).issue[0].code).toBe('not-found');
    });

    test('an owner PUT of a booked appointment on a free slot holds it like a booking', async () => {
      const s = await newSlot(f);
      const res = await request(f.app).put('/fhir/Appointment/owner-made').set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...on(s), id: 'owner-made', status: 'booked' }));
      expect(res.status).toBe(201);
      expect(await slotStatus(f, s.id)).toBe('busy');
      expect((await post(f, on(s))).status).toBe(409);
    });
  });

  describe('institutions: an appointment belongs to the one that booked it', () => {
    test('an appointment booked by A is invisible to B, visible to A and the owners; B cannot re-book it', async () => {
      const s = await newSlot(f);
      const booked = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(s) }, requestor('A'));
      expect(booked.status).toBe(201);
      const id = (booked.body as Appointment).id!;
      expect((booked.body as Appointment).meta!.tag).toContainEqual({ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' });
      expect((await asFhir(f, { method: 'GET', path: ['Appointment', id] }, requestor('B'))).status).toBe(404);
      expect((await asFhir(f, { method: 'GET', path: ['Appointment', id] }, requestor('A'))).status).toBe(200);
      expect((await asFhir(f, { method: 'GET', path: ['Appointment', id] }, owner())).status).toBe(200);
      const steal = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: { ...on(await newSlot(f)), id } }, requestor('B'));
      expect(steal.status).toBe(404);
    });
  });
});
