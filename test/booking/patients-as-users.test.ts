/**
 * Patients as users of the FHIR layer (docs/requirements.md#patients-authorization-code-flow). A
 * patient's identity is what the enforcement point makes of a patient token
 * (test/guard/code-flow.test.ts runs the same through the real flow): they book only for
 * themselves, read, find and cancel only their own Appointments, read only the Patient with their
 * insurance number, and nothing else of anyone.
 */
import type { Appointment, Bundle, OperationOutcome, Patient } from '@medplum/fhirtypes';
import { patientOwner, type Caller } from '../../src/common/identity';
import { DEFAULT_PATIENT_SCOPES } from '../../src/guard/policy/scopes';
import { KVID_SYSTEM } from '../../src/server-lib/owner';
import { asFhir, bookingFixture, freeSlot, owner, parameters, proposal, put, requestor, type BookingFixture } from './builders';

/** The fixture's Patient-Read-Example carries this KVNR. */
const ERIKA = 'X485231029';
const MAX = 'A123456789';

const patientIdentity = (kvnr: string): Caller => ({ institution: patientOwner(kvnr), clientId: 'app', scopes: [...DEFAULT_PATIENT_SCOPES], isOwner: false, patient: kvnr });

let n = 0;
async function newSlot(f: BookingFixture): Promise<{ id: string; start: string; end: string }> {
  n += 1;
  const date = `2027-08-${String(n).padStart(2, '0')}`;
  const s = { id: `patient-slot-${n}`, start: `${date}T09:00:00Z`, end: `${date}T09:20:00Z` };
  await put(f, freeSlot(s.id, s.start, s.end));
  return s;
}

/** A proposal for `s` naming the practitioner but no patient: the patient's own is added. */
const on = (s: { id: string; start: string; end: string }, extra: Partial<Appointment> = {}): Appointment =>
  proposal({ start: s.start, end: s.end, slot: [{ reference: `Slot/${s.id}` }], participant: [{ actor: { reference: 'Practitioner/Practitioner-Read-Example' }, status: 'accepted' }], ...extra });

const cancel = (reason?: string) => ({
  resourceType: 'Parameters',
  parameter: [
    { name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] },
    ...(reason ? [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.comment' }, { name: 'value', valueString: reason }] }] : []),
  ],
});

const issueCode = (body: unknown) => (body as OperationOutcome).issue?.[0]?.code;
const patientRef = (a: Appointment) => a.participant?.find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor?.reference;

// The store is the project's (jest.config.js runs every file on PostgreSQL and on PGlite).
describe('patients as users', () => {
  let f: BookingFixture;
  let erikasBooking: Appointment;
  let maxsBooking: Appointment;

  beforeAll(async () => {
    f = await bookingFixture();
  });
  afterAll(() => f.close());

  test('a patient books for themselves: the Patient with their KVNR is found and named, the booking is theirs', async () => {
    const res = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(await newSlot(f)) }, patientIdentity(ERIKA));
    expect(res.status).toBe(201);
    erikasBooking = res.body as Appointment;
    expect(erikasBooking.status).toBe('booked');
    expect(patientRef(erikasBooking)).toBe('Patient/Patient-Read-Example');
  });

  test('a patient without a Patient yet gets one created with their KVNR (and nothing else they sent as identifier)', async () => {
    const given: Patient = { resourceType: 'Patient', name: [{ family: 'Mustermann', given: ['Max'] }], identifier: [{ system: 'http://testkrankenhaus.de/fhir/sid/Patient', value: 'IdentifierValuepatient-read' }] };
    const res = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: parameters({ 'appt-resource': on(await newSlot(f)), patient: given }) }, patientIdentity(MAX));
    expect(res.status).toBe(201);
    maxsBooking = res.body as Appointment;
    const ref = patientRef(maxsBooking)!;
    // The hospital identifier of Erika's record must not have pulled Max onto it.
    expect(ref).not.toBe('Patient/Patient-Read-Example');
    const created = (await asFhir(f, { method: 'GET', path: ref.split('/') }, patientIdentity(MAX))).body as Patient;
    expect(created.identifier).toEqual([{ system: KVID_SYSTEM, value: MAX }]);
    expect(created.name?.[0].family).toBe('Mustermann');
  });

  test('booking for another patient is 403: a patient parameter with another KVNR, or a participant naming another Patient', async () => {
    const other = await asFhir(
      f,
      { method: 'POST', path: ['Appointment', '$book'], body: parameters({ 'appt-resource': on(await newSlot(f)), patient: { resourceType: 'Patient', identifier: [{ system: KVID_SYSTEM, value: ERIKA }] } }) },
      patientIdentity(MAX),
    );
    expect(other.status).toBe(403);
    expect(issueCode(other.body)).toBe('forbidden');
    const named = await asFhir(
      f,
      { method: 'POST', path: ['Appointment', '$book'], body: on(await newSlot(f), { participant: [{ actor: { reference: 'Patient/Patient-Read-Example' }, status: 'accepted' }] }) },
      patientIdentity(MAX),
    );
    expect(named.status).toBe(403);
    expect(issueCode(named.body)).toBe('forbidden');
  });

  test("reads: their own Appointment and Patient are there, another patient's are 404", async () => {
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!] }, patientIdentity(ERIKA))).status).toBe(200);
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!] }, patientIdentity(MAX))).status).toBe(404);
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!, '_history', '1'] }, patientIdentity(MAX))).status).toBe(404);
    expect((await asFhir(f, { method: 'GET', path: ['Patient', 'Patient-Read-Example'] }, patientIdentity(ERIKA))).status).toBe(200);
    expect((await asFhir(f, { method: 'GET', path: ['Patient', 'Patient-Read-Example'] }, patientIdentity(MAX))).status).toBe(404);
    expect((await asFhir(f, { method: 'GET', path: patientRef(maxsBooking)!.split('/') }, patientIdentity(ERIKA))).status).toBe(404);
    // The repository's own appointments are nobody's to see but the practice's.
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', 'Appointment-Read-Example'] }, patientIdentity(ERIKA))).status).toBe(404);
    // What belongs to nobody stays visible: calendars and slots.
    expect((await asFhir(f, { method: 'GET', path: ['Schedule', 'Schedule-Read-Example'] }, patientIdentity(MAX))).status).toBe(200);
  });

  test('searches find only their own Appointments; includes bring only their own Patient', async () => {
    const mine = await asFhir(f, { method: 'GET', path: ['Appointment'], query: [['_include', 'Appointment:patient']] }, patientIdentity(ERIKA));
    const entries = ((mine.body as Bundle).entry ?? []).map((e) => `${e.resource!.resourceType}/${e.resource!.id}`);
    expect(entries.filter((e) => e.startsWith('Appointment/'))).toEqual([`Appointment/${erikasBooking.id}`]);
    expect(entries.filter((e) => e.startsWith('Patient/'))).toEqual(['Patient/Patient-Read-Example']);
    const byPatient = await asFhir(f, { method: 'GET', path: ['Appointment'], query: [['patient', 'Patient/Patient-Read-Example']] }, patientIdentity(MAX));
    expect((byPatient.body as Bundle).entry ?? []).toEqual([]);
    // The slot's booking is not found through a reverse include either.
    const slots = await asFhir(f, { method: 'GET', path: ['Slot'], query: [['_id', erikasBooking.slot![0].reference!.split('/')[1]], ['_revinclude', 'Appointment:slot']] }, patientIdentity(MAX));
    expect(((slots.body as Bundle).entry ?? []).map((e) => e.resource!.resourceType)).toEqual(['Slot']);
  });

  test('institutions do not see a patient\'s booking; the practice (owner) does', async () => {
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!] }, requestor('1-INST-A'))).status).toBe(404);
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!] }, owner())).status).toBe(200);
  });

  test("a patient cancels their own Appointment by PATCH (a comment may come along); another patient's is 404", async () => {
    const s = await newSlot(f);
    const booked = (await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(s) }, patientIdentity(ERIKA))).body as Appointment;
    expect((await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.id!], body: cancel() }, patientIdentity(MAX))).status).toBe(404);
    const res = await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.id!], body: cancel('Ich bin verhindert') }, patientIdentity(ERIKA));
    expect(res.status).toBe(200);
    expect((res.body as Appointment).status).toBe('cancelled');
    expect((await asFhir(f, { method: 'GET', path: ['Slot', s.id] }, patientIdentity(ERIKA))).body).toMatchObject({ status: 'free' });
  });

  test('a patient changes nothing else of an Appointment and creates none by REST (403)', async () => {
    const booked = (await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: on(await newSlot(f)) }, patientIdentity(ERIKA))).body as Appointment;
    const comment = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.patientInstruction' }, { name: 'value', valueString: 'x' }] }] };
    const edited = await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.id!], body: comment }, patientIdentity(ERIKA));
    expect(edited.status).toBe(403);
    expect(issueCode(edited.body)).toBe('forbidden');
    const put = await asFhir(f, { method: 'PUT', path: ['Appointment', booked.id!], body: { ...booked, description: 'mine' } }, patientIdentity(ERIKA));
    expect(put.status).toBe(403);
    const created = await asFhir(f, { method: 'POST', path: ['Appointment'], body: { ...on(await newSlot(f)), status: 'proposed' } }, patientIdentity(ERIKA));
    expect(created.status).toBe(403);
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', booked.id!] }, patientIdentity(ERIKA))).body).toMatchObject({ status: 'booked', meta: { versionId: '1' } });
  });

  test('re-booking or replacing someone else\'s Appointment is refused like reading it', async () => {
    const moved = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: { ...on(await newSlot(f)), id: erikasBooking.id } }, patientIdentity(MAX));
    expect(moved.status).toBe(404);
    const replaced = await asFhir(
      f,
      { method: 'POST', path: ['Appointment', '$book'], body: parameters({ 'appt-resource': on(await newSlot(f)), 'cancelled-appt-id': { valueUri: erikasBooking.id } }) },
      patientIdentity(MAX),
    );
    expect(replaced.status).toBe(422);
    expect((await asFhir(f, { method: 'GET', path: ['Appointment', erikasBooking.id!] }, owner())).body).toMatchObject({ status: 'booked' });
  });
});
