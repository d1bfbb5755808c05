import request from 'supertest';
import type { Appointment, HealthcareService, Resource } from '@medplum/fhirtypes';
import { bookingFixture, FHIR_JSON, freeSlot, parameters, patient, proposal, put, schedule, type BookingFixture } from './builders';

const inactiveService: HealthcareService = {
  resourceType: 'HealthcareService',
  id: 'inactive-hcs',
  meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKMedizinischeBehandlungseinheit'] },
  active: false,
  type: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177', display: 'Neurology' }] }],
  specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR', display: 'Neurologie' }] }],
  name: 'Geschlossene Ambulanz',
};

const at = (slot: string, start = '2027-06-01T10:00:00Z', end = '2027-06-01T10:30:00Z', extra: Partial<Appointment> = {}) =>
  proposal({ start, end, slot: [{ reference: `Slot/${slot}` }], ...extra });
const withoutSlot = (extra: Partial<Appointment> = {}) => {
  const { slot: _s, ...a } = proposal({ start: '2027-06-01T10:00:00Z', end: '2027-06-01T10:30:00Z', ...extra });
  return a;
};
const onSchedule = (id: string) => ({ valueReference: { reference: `Schedule/${id}` } });
const patientRef = (id: string) => [{ actor: { reference: `Patient/${id}` }, status: 'accepted' as const }];
const withService = (id: string) => ({ participant: [...patientRef('Patient-Read-Example'), { actor: { reference: `HealthcareService/${id}` }, status: 'accepted' as const }] });
const SCHEDULE_PARAMETER = "Parameters.parameter.where(name='schedule')";

/**
 * Every rejection of $book with its exact status and issue code (docs/requirements.md#booking-book;
 * ISiK 6.0.0: syntax 400, semantics 422; a taken slot 409), and the expression where it matters.
 * Nothing is booked by any of them.
 */
const cases: [string, () => unknown, number, string, string?][] = [
  ['a Patient as body', () => patient('x'), 400, 'invalid'],
  ['an empty JSON object', () => ({}), 400, 'structure'],
  ['Parameters without appt-resource', () => parameters({ schedule: onSchedule('Schedule-Read-Example') }), 400, 'required'],
  ['an unknown parameter', () => parameters({ 'appt-resource': at('rej-slot'), foo: { valueString: 'x' } }), 400, 'invalid'],
  ['a parameter given twice', () => ({ resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: at('rej-slot') }, { name: 'appt-resource', resource: at('rej-slot') }] }), 400, 'invalid'],
  ['appt-resource holding a Slot', () => parameters({ 'appt-resource': freeSlot('s', '2027-06-01T10:00:00Z', '2027-06-01T10:30:00Z') }), 400, 'invalid'],
  ['no start and end', () => ({ ...at('rej-slot'), start: undefined, end: undefined }), 400, 'required'],
  ['a start that is no instant', () => at('rej-slot', 'tomorrow'), 400, 'structure'],
  ['status booked', () => at('rej-slot', undefined, undefined, { status: 'booked' }), 422, 'business-rule'],
  ['a start in the past', () => at('rej-slot', '2020-01-01T10:00:00Z', '2020-01-01T10:30:00Z'), 422, 'business-rule'],
  ['end before start (R4 invariant)', () => at('rej-slot', '2027-06-01T10:30:00Z', '2027-06-01T10:00:00Z'), 422, 'invariant'],
  ['neither slot nor schedule', () => withoutSlot(), 400, 'required'],
  ['a slot reference to another type (ISiKTermin)', () => ({ ...at('rej-slot'), slot: [{ reference: 'Patient/Patient-Read-Example' }] }), 422, 'value'],
  ['a slot that does not exist', () => at('no-such-slot'), 422, 'not-found'],
  ['a busy slot', () => at('Slot-Read-Example', '2027-01-01T13:00:00Z', '2027-01-01T14:00:00Z'), 409, 'conflict'],
  ['a time outside its slot', () => at('rej-slot', '2027-06-01T10:15:00Z', '2027-06-01T10:45:00Z'), 422, 'business-rule'],
  ['a second slot beside the appointment', () => at('rej-slot', undefined, undefined, { slot: [{ reference: 'Slot/rej-slot' }, { reference: 'Slot/far-slot' }] }), 422, 'business-rule', 'Appointment.slot[1]'],
  ['a slot of another schedule than the schedule parameter', () => parameters({ 'appt-resource': at('rej-slot'), schedule: onSchedule('inactive-schedule') }), 422, 'business-rule'],
  ['a patient that does not exist', () => at('rej-slot', undefined, undefined, { participant: patientRef('nobody') }), 422, 'not-found'],
  ['an inactive patient', () => at('rej-slot', undefined, undefined, { participant: patientRef('inactive-patient') }), 422, 'business-rule'],
  ['a deleted patient', () => at('rej-slot', undefined, undefined, { participant: patientRef('deleted-patient') }), 422, 'not-found'],
  ['an inactive schedule', () => at('inactive-schedule-slot'), 422, 'business-rule'],
  ['a schedule of an inactive HealthcareService', () => at('hcs-slot'), 422, 'business-rule'],
  ['an inactive HealthcareService as participant', () => at('rej-slot', undefined, undefined, withService('inactive-hcs')), 422, 'business-rule', 'Appointment.participant[1].actor'],
  ['a deleted HealthcareService as participant', () => at('rej-slot', undefined, undefined, withService('deleted-hcs')), 422, 'not-found', 'Appointment.participant[1].actor'],
  ['a HealthcareService as participant that does not exist', () => at('rej-slot', undefined, undefined, withService('no-such-hcs')), 422, 'not-found', 'Appointment.participant[1].actor'],
  ['a schedule parameter naming no Schedule', () => parameters({ 'appt-resource': withoutSlot(), schedule: onSchedule('no-such-schedule') }), 422, 'not-found', SCHEDULE_PARAMETER],
  ['a schedule parameter naming a deleted Schedule', () => parameters({ 'appt-resource': withoutSlot(), schedule: onSchedule('deleted-schedule') }), 422, 'not-found', SCHEDULE_PARAMETER],
  ['a schedule parameter that is no Schedule reference', () => parameters({ 'appt-resource': withoutSlot(), schedule: { valueReference: { reference: 'Slot/rej-slot' } } }), 400, 'value'],
  ['a schedule time without slots', () => parameters({ 'appt-resource': withoutSlot({ start: '2027-06-02T03:00:00Z', end: '2027-06-02T03:30:00Z' }), schedule: onSchedule('Schedule-Read-Example') }), 422, 'business-rule'],
  ['a schedule time overlapping a busy slot', () => parameters({ 'appt-resource': withoutSlot({ start: '2027-01-01T13:30:00Z', end: '2027-01-01T13:45:00Z' }), schedule: onSchedule('Schedule-Read-Example') }), 409, 'conflict'],
  ['cancelled-appt-id of an unknown appointment', () => parameters({ 'appt-resource': at('rej-slot'), 'cancelled-appt-id': { valueUri: 'Appointment/nope' } }), 422, 'not-found'],
  ['cancelled-appt-id of a cancelled appointment', () => parameters({ 'appt-resource': at('rej-slot'), 'cancelled-appt-id': { valueString: 'Appointment-Read-Example' } }), 422, 'business-rule'],
  ['cancelled-appt-id that is no id', () => parameters({ 'appt-resource': at('rej-slot'), 'cancelled-appt-id': { valueString: 'not an id!' } }), 400, 'value'],
  ['patientSubmittedInformation without text', () => parameters({ 'appt-resource': at('rej-slot'), patientSubmittedInformation: { resourceType: 'QuestionnaireResponse', status: 'completed' } }), 422, 'required'],
  ['a patient parameter matching an inactive patient', () => parameters({ 'appt-resource': at('rej-slot', undefined, undefined, { participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }] }), patient: patient('p', { identifier: [{ system: 'urn:test', value: 'inactive-1' }] }) }), 422, 'business-rule'],
];

describe('$book rejections', () => {
  let f: BookingFixture;
  beforeAll(async () => {
    f = await bookingFixture();
    await put(
      f,
      inactiveService as Resource,
      { ...inactiveService, id: 'deleted-hcs', active: true } as Resource,
      schedule('deleted-schedule'),
      freeSlot('far-slot', '2027-06-01T15:00:00Z', '2027-06-01T15:30:00Z'),
      schedule('inactive-schedule', { active: false }),
      schedule('hcs-schedule', { actor: [{ reference: 'HealthcareService/inactive-hcs', display: 'Geschlossene Ambulanz' }] }),
      freeSlot('rej-slot', '2027-06-01T10:00:00Z', '2027-06-01T10:30:00Z'),
      freeSlot('inactive-schedule-slot', '2027-06-01T10:00:00Z', '2027-06-01T10:30:00Z', 'inactive-schedule'),
      freeSlot('hcs-slot', '2027-06-01T10:00:00Z', '2027-06-01T10:30:00Z', 'hcs-schedule'),
      patient('inactive-patient', { active: false, identifier: [{ system: 'urn:test', value: 'inactive-1' }] }),
      patient('deleted-patient'),
    );
    for (const path of ['Patient/deleted-patient', 'HealthcareService/deleted-hcs', 'Schedule/deleted-schedule']) {
      expect((await request(f.app).delete(`/fhir/${path}`)).status).toBe(200);
    }
  });
  afterAll(() => f.close());

  test.each(cases)('%s', async (_name, body, status, code, expression = undefined) => {
    const res = await request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(body()));
    expect({ status: res.status, code: res.body.issue?.[0]?.code }).toEqual({ status, code });
    expect(res.body.resourceType).toBe('OperationOutcome');
    if (expression) expect(res.body.issue[0].expression).toEqual([expression]);
  });

  test('an unknown parameter ("slot") is answered with the parameters $book accepts', async () => {
    const body = parameters({ 'appt-resource': at('rej-slot'), slot: { valueReference: { reference: 'Slot/rej-slot' } } });
    const res = await request(f.app).post('/fhir/Appointment/$book').set('Content-Type', FHIR_JSON).send(JSON.stringify(body));
    expect([res.status, res.body.issue.length, res.body.issue[0]]).toEqual([
      400,
      1,
      expect.objectContaining({
        severity: 'error',
        code: 'invalid',
        diagnostics: 'Unknown $book parameter "slot": the parameters of $book are appt-resource, cancelled-appt-id, schedule, patient, related-person, patientSubmittedInformation',
        expression: ['Parameters.parameter.name'],
      }),
    ]);
  });

  test('none of them booked anything or changed a slot', async () => {
    const appts = await request(f.app).get('/fhir/Appointment?status=booked,pending');
    expect(appts.body.total).toBe(0);
    for (const id of ['rej-slot', 'far-slot']) {
      const slot = await request(f.app).get(`/fhir/Slot/${id}`);
      expect([slot.body.status, slot.body.meta.versionId]).toEqual(['free', '1']);
    }
  });
});
