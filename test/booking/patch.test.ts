import request from 'supertest';
import type { Appointment, Parameters } from '@medplum/fhirtypes';
import { asFhir, bookingFixture, FHIR_JSON, freeSlot, MANUAL, NEUR, owner, patient, proposal, put, requestor, schedule, type BookingFixture } from './builders';

/** One FHIRPath Patch operation. */
function op(type: string, path: string, value?: Record<string, unknown>, extra: Record<string, unknown> = {}): Parameters {
  const part: Parameters['parameter'] = [
    { name: 'type', valueCode: type },
    { name: 'path', valueString: path },
  ];
  if (value) part.push({ name: 'value', ...value });
  for (const [name, v] of Object.entries(extra)) part.push({ name, ...(v as object) });
  return { resourceType: 'Parameters', parameter: [{ name: 'operation', part }] };
}

const cancel = (reason = 'pat') => ({
  resourceType: 'Parameters',
  parameter: [
    { name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] },
    {
      name: 'operation',
      part: [
        { name: 'type', valueCode: 'add' },
        { name: 'path', valueString: 'Appointment' },
        { name: 'name', valueString: 'cancelationReason' },
        { name: 'value', valueCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason', code: reason }] } },
      ],
    },
  ],
});

let day = 0;
/** A fresh free slot on its own day, so tests do not share bookings. */
async function slotOnNewDay(f: BookingFixture, scheduleId = 'Schedule-Read-Example'): Promise<{ id: string; start: string; end: string }> {
  day += 1;
  const date = new Date(Date.UTC(2027, 3, day)).toISOString().slice(0, 10);
  const s = { id: `patch-slot-${scheduleId}-${day}`, start: `${date}T10:00:00Z`, end: `${date}T10:30:00Z` };
  await put(f, freeSlot(s.id, s.start, s.end, scheduleId));
  return s;
}

async function booked(f: BookingFixture, scheduleId?: string, extra: Partial<Appointment> = {}): Promise<Appointment> {
  const s = await slotOnNewDay(f, scheduleId);
  const res = await request(f.app)
    .post('/fhir/Appointment/$book')
    .set('Content-Type', FHIR_JSON)
    .send(JSON.stringify(proposal({ start: s.start, end: s.end, slot: [{ reference: `Slot/${s.id}` }], ...extra })));
  expect([201, 202]).toContain(res.status);
  return res.body as Appointment;
}

const patchHttp = (f: BookingFixture, id: string, body: unknown, contentType = FHIR_JSON) =>
  request(f.app).patch(`/fhir/Appointment/${id}`).set('Content-Type', contentType).send(JSON.stringify(body));

async function outbox(f: BookingFixture, id: string): Promise<{ event_type: string; version_id: number; origin: string }[]> {
  const { rows } = await f.ctx.db.query<{ event_type: string; version_id: number; origin: string }>(
    'SELECT event_type, version_id, origin FROM outbox WHERE resource_id = $1 ORDER BY id',
    [id],
  );
  return rows;
}

const BASE = 'http://localhost:8080/fhir';
const PATIENT_EXPRESSION = 'Appointment.participant.actor.where(resolve() is Patient)';
/** $book takes the patient as an absolute URL on the base too (references.ts localId). */
const ABSOLUTE_PATIENT: Partial<Appointment> = { participant: [{ actor: { reference: `${BASE}/Patient/Patient-Read-Example`, display: 'Test Patient' }, status: 'accepted' }] };
const actorValue = (reference: string) => op('replace', 'Appointment.participant[0].actor', { valueReference: { reference } });

describe('PATCH Appointment (ISiK Terminplanung 6.0.0)', () => {
  let f: BookingFixture;
  beforeAll(async () => {
    f = await bookingFixture();
    await put(f, schedule('manual-schedule', { extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'manuell' }, MANUAL] }), patient('other-patient'));
  });
  afterAll(() => f.close());

  test.each<[string, Parameters, string, Partial<Appointment>?]>([
    ['Appointment.start', op('replace', 'Appointment.start', { valueInstant: '2027-04-20T09:00:00Z' }), 'Appointment.start'],
    ['Appointment.end', op('replace', 'Appointment.end', { valueInstant: '2027-04-20T11:00:00Z' }), 'Appointment.end'],
    ['Appointment.slot', op('replace', 'Appointment.slot[0]', { valueReference: { reference: 'Slot/Slot-Read-Example' } }), 'Appointment.slot'],
    ['a second slot', op('add', 'Appointment', { valueReference: { reference: 'Slot/Slot-Read-Example' } }, { name: { valueString: 'slot' } }), 'Appointment.slot'],
    ['the patient participant', op('replace', 'Appointment.participant[0].actor', { valueReference: { reference: 'Patient/other-patient' } }), 'Appointment.participant.actor.where(resolve() is Patient)'],
    [
      'the patient by the ISiK path',
      op('replace', 'Appointment.participant.actor.where(resolve() is Patient)', { valueReference: { reference: 'Patient/other-patient' } }),
      'Appointment.participant.actor.where(resolve() is Patient)',
    ],
    ['a patient booked as an absolute URL, for another patient', actorValue('Patient/other-patient'), PATIENT_EXPRESSION, ABSOLUTE_PATIENT],
    ['a patient booked as an absolute URL, for another absolute URL', actorValue(`${BASE}/Patient/other-patient`), PATIENT_EXPRESSION, ABSOLUTE_PATIENT],
    ['the patient, for another patient written as an absolute URL', actorValue(`${BASE}/Patient/other-patient`), PATIENT_EXPRESSION],
    ['the patient, for another patient with a version', actorValue('Patient/other-patient/_history/1'), PATIENT_EXPRESSION],
  ])('changing %s answers 400 business-rule naming the element', async (_what, body, expression, extra = {}) => {
    const appt = await booked(f, undefined, extra);
    const res = await patchHttp(f, appt.id!, body);
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].code).toBe('business-rule');
    expect(res.body.issue[0].expression).toEqual([expression]);
    expect((await request(f.app).get(`/fhir/Appointment/${appt.id}`)).body.meta.versionId).toBe(appt.meta!.versionId);
  });

  test.each<[string, (a: Appointment) => Parameters, Partial<Appointment>?]>([
    ['the same start', (a: Appointment) => op('replace', 'Appointment.start', { valueInstant: a.start })],
    ['the same instant with an offset', (a: Appointment) => op('replace', 'Appointment.start', { valueInstant: a.start!.replace(/T10:00:00Z$/, 'T12:00:00+02:00') })],
    ['the same patient', () => op('replace', 'Appointment.participant[0].actor', { valueReference: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' } })],
    ['the same patient with a version', () => actorValue('Patient/Patient-Read-Example/_history/1')],
    ['the same patient as an absolute URL', () => actorValue(`${BASE}/Patient/Patient-Read-Example`)],
    ['the same patient as Patient/id where it was booked as an absolute URL', () => actorValue('Patient/Patient-Read-Example'), ABSOLUTE_PATIENT],
    ['the same slot as an absolute URL', (a: Appointment) => op('replace', 'Appointment.slot[0]', { valueReference: { reference: `${BASE}/${a.slot![0].reference}` } })],
  ])('replacing an immutable element with %s is allowed (200)', async (_what, body, extra = {}) => {
    const appt = await booked(f, undefined, extra);
    const res = await patchHttp(f, appt.id!, body(appt));
    expect(res.status).toBe(200);
    expect(res.body.meta.versionId).toBe('2');
  });

  test('JSON Patch changing start answers 400 business-rule as well', async () => {
    const appt = await booked(f);
    const res = await patchHttp(f, appt.id!, [{ op: 'replace', path: '/start', value: '2027-05-01T10:00:00Z' }], 'application/json-patch+json');
    expect(res.status).toBe(400);
    expect(res.body.issue[0].code).toBe('business-rule');
    expect(res.body.issue[0].expression).toEqual(['Appointment.start']);
  });

  test('JSON Patch of an allowed element applies (200)', async () => {
    const appt = await booked(f);
    const res = await patchHttp(f, appt.id!, [{ op: 'replace', path: '/comment', value: 'Neu' }], 'application/json-patch+json');
    expect(res.status).toBe(200);
    expect(res.body.comment).toBe('Neu');
  });

  test.each([
    ['a Slot instead of Parameters', { resourceType: 'Slot' }, FHIR_JSON, 400, 'invalid'],
    ['an unknown operation type', op('rename', 'Appointment.comment', { valueString: 'x' }), FHIR_JSON, 400, 'code-invalid'],
    ['replace without value', op('replace', 'Appointment.comment'), FHIR_JSON, 400, 'required'],
    ['a path that is no FHIRPath', op('replace', 'Appointment.(', { valueString: 'x' }), FHIR_JSON, 400, 'invalid'],
    ['descendants() in the path', op('delete', 'Appointment.descendants()'), FHIR_JSON, 400, 'too-costly'],
    ['replace of a missing element', op('replace', 'Appointment.description', { valueString: 'x' }), FHIR_JSON, 422, 'processing'],
    ['replace with a value of the wrong type', op('replace', 'Appointment.comment', { valueBoolean: true }), FHIR_JSON, 422, 'value'],
    ['replace matching several elements', op('replace', 'Appointment.specialty.coding.code', { valueCode: 'X' }), FHIR_JSON, 422, 'processing'],
    ['JSON Patch on /id', [{ op: 'replace', path: '/id', value: 'x' }], 'application/json-patch+json', 422, 'invalid'],
    ['JSON Patch test that fails', [{ op: 'test', path: '/status', value: 'cancelled' }], 'application/json-patch+json', 409, 'conflict'],
    ['JSON Patch that is no array', { op: 'replace' }, 'application/json-patch+json', 400, 'structure'],
  ])('a patch with %s is refused', async (_what, body, contentType, status, code) => {
    const twoSpecialties = [{ coding: [NEUR] }, { coding: [{ ...NEUR, code: 'ALLG', display: 'Allgemeinmedizin' }] }];
    const appt = await booked(f, undefined, { specialty: twoSpecialties });
    const res = await patchHttp(f, appt.id!, body, contentType);
    expect(res.status).toBe(status);
    expect(res.body.issue[0].code).toBe(code);
  });

  test('If-Match with a stale version answers 412', async () => {
    const appt = await booked(f);
    const res = await patchHttp(f, appt.id!, op('replace', 'Appointment.start', { valueInstant: '2030-01-01T00:00:00Z' })).set('If-Match', 'W/"7"');
    expect(res.status).toBe(412);
    expect(res.body.issue[0].code).toBe('conflict');
    const ok = await patchHttp(f, appt.id!, op('replace', 'Appointment.status', { valueCode: 'cancelled' })).set('If-Match', `W/"${appt.meta!.versionId}"`);
    expect(ok.status).toBe(200);
  });

  test('cancelling by PATCH frees the slot, keeps the cancelationReason and records appointment.cancelled', async () => {
    const appt = await booked(f);
    const res = await patchHttp(f, appt.id!, cancel());
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('cancelled');
    expect(res.body.cancelationReason.coding[0].code).toBe('pat');
    const slotId = appt.slot![0].reference!.split('/')[1];
    expect((await request(f.app).get(`/fhir/Slot/${slotId}`)).body.status).toBe('free');
    expect(await outbox(f, appt.id!)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2, origin: 'repository' }]);
    // The freed slot can be booked again.
    const again = await request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(proposal({ start: appt.start, end: appt.end, slot: appt.slot })));
    expect(again.status).toBe(201);
  });

  test('a PATCH that changes nothing but a comment records appointment.updated', async () => {
    const appt = await booked(f);
    expect((await patchHttp(f, appt.id!, op('replace', 'Appointment.comment', { valueString: 'geändert' }))).status).toBe(200);
    expect(await outbox(f, appt.id!)).toEqual([{ event_type: 'appointment.updated', version_id: 2, origin: 'repository' }]);
  });

  describe('confirmation workflow (manual schedule: 202 pending)', () => {
    test('$book on a manual schedule answers 202 with a pending appointment', async () => {
      const appt = await booked(f, 'manual-schedule');
      expect(appt.status).toBe('pending');
    });

    test('a requestor cannot confirm (403 forbidden), an owner can (200, appointment.updated)', async () => {
      const appt = await booked(f, 'manual-schedule');
      const confirm = op('replace', 'Appointment.status', { valueCode: 'booked' });
      const denied = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: confirm }, requestor());
      expect(denied.status).toBe(403);
      expect((denied.body as { issue: { code: string }[] }).issue[0].code).toBe('forbidden');
      const done = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: confirm }, owner());
      expect(done.status).toBe(200);
      expect((done.body as Appointment).status).toBe('booked');
      expect(await outbox(f, appt.id!)).toEqual([{ event_type: 'appointment.updated', version_id: 2, origin: 'repository' }]);
    });

    test('an owner declines: cancelled, slot free, appointment.cancelled', async () => {
      const appt = await booked(f, 'manual-schedule');
      const res = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: cancel('prov') }, owner());
      expect(res.status).toBe(200);
      expect((res.body as Appointment).status).toBe('cancelled');
      const slotId = appt.slot![0].reference!.split('/')[1];
      expect((await request(f.app).get(`/fhir/Slot/${slotId}`)).body.status).toBe('free');
      expect(await outbox(f, appt.id!)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2, origin: 'repository' }]);
    });

    test.each([
      ['booked', async () => booked(f)],
      ['cancelled', async () => (await patchHttp(f, (await booked(f)).id!, cancel())).body as Appointment],
    ])('a requestor cannot move a %s appointment to pending (403 forbidden)', async (_from, make) => {
      const appt = await make();
      const toPending = op('replace', 'Appointment.status', { valueCode: 'pending' });
      const denied = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: toPending }, requestor());
      expect(denied.status).toBe(403);
      expect((denied.body as { issue: { code: string }[] }).issue[0].code).toBe('forbidden');
      expect((await request(f.app).get(`/fhir/Appointment/${appt.id}`)).body.meta.versionId).toBe(appt.meta!.versionId);
    });

    test('an owner may move a booked appointment to pending (200)', async () => {
      const appt = await booked(f);
      const done = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: op('replace', 'Appointment.status', { valueCode: 'pending' }) }, owner());
      expect([done.status, (done.body as Appointment).status]).toEqual([200, 'pending']);
    });

    test('a requestor may withdraw its pending appointment (origin requestor)', async () => {
      const appt = await booked(f, 'manual-schedule');
      const res = await asFhir(f, { method: 'PATCH', path: ['Appointment', appt.id!], body: cancel() }, requestor());
      expect(res.status).toBe(200);
      expect(await outbox(f, appt.id!)).toEqual([{ event_type: 'appointment.cancelled', version_id: 2, origin: 'requestor' }]);
    });
  });

  test('PATCH works on other types too (Patient)', async () => {
    const res = await request(f.app)
      .patch('/fhir/Patient/other-patient')
      .set('Content-Type', FHIR_JSON)
      .send(JSON.stringify(op('add', 'Patient', { valueDate: '1980-02-03' }, { name: { valueString: 'birthDate' } })));
    expect(res.status).toBe(200);
    expect(res.body.birthDate).toBe('1980-02-03');
  });

  test('PATCH of an unknown appointment answers 404', async () => {
    const res = await patchHttp(f, 'does-not-exist', cancel());
    expect(res.status).toBe(404);
    expect(res.body.issue[0].code).toBe('not-found');
  });

});
