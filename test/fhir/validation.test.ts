import type { Appointment, Extension, HealthcareService, Patient, Resource, Schedule, Slot } from '@medplum/fhirtypes';
import { knownProfiles, preloadValidation, requiredProfile, validateResource } from '../../src/model/validation';

const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';
const PRIORITY_EXT = `${ISIK}ISiKTerminPriorityExtension`;
const NEUR = { coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' }] };
const SERVICE_177 = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] };

/** Appointment as JSON: the priority extension sits on the primitive (`_priority`). */
type AppointmentJson = Appointment & { _priority?: { extension?: Extension[] } };

// Builders: valid resources per the ISiK examples (scheduling.md section 4), changed per case.
function appointment(change: (a: AppointmentJson) => void = () => undefined): AppointmentJson {
  const a: AppointmentJson = {
    resourceType: 'Appointment',
    meta: { tag: [{ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' }] },
    status: 'booked',
    start: '2027-01-01T11:05:00Z',
    end: '2027-01-01T11:55:00Z',
    slot: [{ reference: 'Slot/Slot-Free-Example' }],
    serviceType: [SERVICE_177],
    specialty: [NEUR],
    participant: [{ actor: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' }, status: 'accepted' }],
    _priority: {
      extension: [
        { url: PRIORITY_EXT, valueCodeableConcept: { coding: [{ system: 'http://snomed.info/sct', code: '394848005' }] } },
      ],
    },
  };
  change(a);
  return a;
}

function schedule(change: (s: Schedule) => void = () => undefined): Schedule {
  const s: Schedule = {
    resourceType: 'Schedule',
    extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'Neuro' }],
    active: true,
    serviceType: [{ ...SERVICE_177, text: 'Neurologie' }],
    specialty: [NEUR],
    actor: [{ reference: 'Practitioner/Practitioner-Read-Example', display: 'Dr. Walter Musterarzt' }],
  };
  change(s);
  return s;
}

function slot(change: (s: Slot) => void = () => undefined): Slot {
  const s: Slot = {
    resourceType: 'Slot',
    schedule: { reference: 'Schedule/Schedule-Read-Example' },
    status: 'free',
    start: '2027-01-01T09:00:00Z',
    end: '2027-01-01T20:00:00Z',
  };
  change(s);
  return s;
}

function healthcareService(change: (h: HealthcareService) => void = () => undefined): HealthcareService {
  const h: HealthcareService = {
    resourceType: 'HealthcareService',
    active: true,
    type: [SERVICE_177],
    specialty: [NEUR],
    name: 'General consultation office of the Neurology department',
  };
  change(h);
  return h;
}

function isikPatient(change: (p: Patient) => void = () => undefined): Patient {
  const p: Patient = {
    resourceType: 'Patient',
    meta: { profile: [`${ISIK}ISiKPatient`] },
    identifier: [
      {
        type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'MR' }] },
        system: 'https://fhir.krankenhaus.example/sid/PID',
        value: '123456',
      },
    ],
    name: [{ use: 'official', family: 'Duplikat', given: ['Doris'] }],
    gender: 'female',
    birthDate: '1964-08-12',
  };
  change(p);
  return p;
}

type Case = [name: string, resource: unknown, status: 400 | 422, code: string, expression: string];

describe('validateResource', () => {
  beforeAll(() => preloadValidation());

  test.each<[string, Resource]>([
    ['ISiKTermin', appointment()],
    ['ISiKTermin proposed without start/end', appointment((a) => ((a.status = 'proposed'), delete a.start, delete a.end))],
    ['ISiKKalender', schedule()],
    ['ISiKTerminblock', slot()],
    ['ISiKMedizinischeBehandlungseinheit', healthcareService()],
    ['ISiKPatient', isikPatient()],
    ['a core-only Patient as $book creates it', { resourceType: 'Patient', name: [{ family: 'Patient' }] }],
    ['start equal to end written with other precision and offset', slot((s) => ((s.start = '2027-01-01T10:00:00+01:00'), (s.end = '2027-01-01T09:00:00.000Z')))],
  ])('accepts a valid %s', (_name, resource) => {
    expect(validateResource(resource)).toEqual({ ok: true });
  });

  test.each<Case>([
    ['a non-object body', [1, 2], 400, 'structure', '$this'],
    ['a resource without resourceType', { id: 'x' }, 400, 'structure', 'resourceType'],
    ['an unknown resourceType', { resourceType: 'Termin' }, 400, 'structure', 'resourceType'],
    ['an abstract resourceType', { resourceType: 'DomainResource' }, 400, 'structure', 'resourceType'],
    ['an unknown element', slot((s) => Object.assign(s, { colour: 'blue' })), 400, 'structure', 'Slot.colour'],
    ['a wrong JSON type', slot((s) => Object.assign(s, { overbooked: 'yes' })), 400, 'structure', 'Slot.overbooked'],
    ['a malformed instant', slot((s) => (s.start = '2027-01-01 09:00')), 400, 'structure', 'Slot.start'],
    ['a single value where an array belongs', appointment((a) => Object.assign(a, { slot: { reference: 'Slot/x' } })), 400, 'structure', 'Appointment.slot'],
    ['an empty string', slot((s) => (s.comment = '')), 400, 'structure', 'Slot.comment'],
    ['a malformed id', slot((s) => (s.id = 'not an id')), 400, 'value', 'Slot.id'],
    ['two value[x] at once', schedule((s) => Object.assign(s.extension![0], { valueCode: 'x' })), 400, 'structure', 'valueCode'],
  ])('rejects %s with 400', (_name, resource, status, code, expression) => {
    expectIssue(resource, status, code, expression);
  });

  test.each<Case>([
    // base R4
    ['a missing required element (R4 Slot.schedule 1..1)', slot((s) => delete (s as Partial<Slot>).schedule), 422, 'required', 'Slot.schedule'],
    ['a status outside the required value set', slot((s) => (s.status = 'open' as Slot['status'])), 422, 'code-invalid', 'Slot.status'],
    ['a participant status outside the value set', appointment((a) => (a.participant[0].status = 'maybe' as 'accepted')), 422, 'code-invalid', 'Appointment.participant[0].status'],
    ['a base invariant (app-3: booked needs start and end)', appointment((a) => (delete a.start, delete a.end)), 422, 'invariant', 'Appointment'],
    ['a reference to the wrong type', slot((s) => (s.schedule = { reference: 'Patient/p1' })), 422, 'value', 'Slot.schedule'],
    // ISiKTermin
    ['ISiK-app-1 (end before start across offsets)', appointment((a) => ((a.start = '2027-01-01T12:00:00+01:00'), (a.end = '2027-01-01T10:30:00Z'))), 422, 'invariant', 'Appointment'],
    ['ISiKTermin without serviceType', appointment((a) => delete a.serviceType), 422, 'required', 'Appointment.serviceType'],
    ['ISiKTermin participant without actor', appointment((a) => a.participant.push({ type: [{ text: 'Dolmetscher' }], status: 'accepted' })), 422, 'required', 'Appointment.participant[1].actor'],
    ['ISiKTermin slot without reference', appointment((a) => (a.slot = [{ display: 'somewhere' }])), 422, 'required', 'Appointment.slot[0].reference'],
    ['ISiKTermin cancelationReason outside ISiKTerminCancelationReason', appointment((a) => ((a.status = 'cancelled'), (a.cancelationReason = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason', code: 'oth-weath' }] }))), 422, 'code-invalid', 'Appointment.cancelationReason'],
    ['ISiKTermin priority outside ISiKTerminPriority', appointment((a) => (a._priority!.extension![0].valueCodeableConcept!.coding![0].code = '12345')), 422, 'invariant', 'Appointment'],
    ['ISiKTermin with two Priority extensions', appointment((a) => a._priority!.extension!.push({ ...a._priority!.extension![0] })), 422, 'invariant', 'Appointment'],
    ['ISiKTermin specialty without Fachrichtung coding', appointment((a) => (a.specialty = [{ coding: [{ system: 'urn:oid:1.2.276.0.76.5.114', code: '142' }] }])), 422, 'invariant', 'Appointment.specialty[0]'],
    ['ISiKTermin specialty without coding', appointment((a) => (a.specialty = [{ text: 'Neurologie' }])), 422, 'required', 'Appointment.specialty[0].coding'],
    // ISiKKalender
    ['ISiKKalender without active', schedule((s) => delete s.active), 422, 'required', 'Schedule.active'],
    ['ISiKKalender without specialty', schedule((s) => delete s.specialty), 422, 'required', 'Schedule.specialty'],
    ['ISiKKalender with two KalenderName extensions', schedule((s) => s.extension!.push({ ...s.extension![0] })), 422, 'invariant', 'Schedule'],
    ['ISiKKalender with two Akteur actors', schedule((s) => s.actor.push({ reference: 'HealthcareService/h1' })), 422, 'invariant', 'Schedule'],
    // ISiKTerminblock
    ['ISiK-slot-1 (end before start)', slot((s) => (s.end = '2027-01-01T08:00:00Z')), 422, 'invariant', 'Slot'],
    ['ISiKTerminblock schedule without reference', slot((s) => (s.schedule = { display: 'Neuro' })), 422, 'required', 'Slot.schedule.reference'],
    // ISiKMedizinischeBehandlungseinheit
    ['HealthcareService without name', healthcareService((h) => delete h.name), 422, 'required', 'HealthcareService.name'],
    ['HealthcareService without type', healthcareService((h) => delete h.type), 422, 'required', 'HealthcareService.type'],
    ['HealthcareService without active', healthcareService((h) => delete h.active), 422, 'required', 'HealthcareService.active'],
    // ISiKPatient, when claimed
    ['ISiKPatient without Patientennummer', isikPatient((p) => delete p.identifier), 422, 'invariant', 'Patient'],
    ['ISiKPatient without official name', isikPatient((p) => (p.name![0].use = 'usual')), 422, 'invariant', 'Patient'],
    ['isik-pat-1 (gender other without gender-amtlich-de)', isikPatient((p) => (p.gender = 'other')), 422, 'invariant', 'Patient'],
    ['ISiKPatient without gender', isikPatient((p) => delete p.gender), 422, 'required', 'Patient.gender'],
    ['ISiKPatient without birthDate', isikPatient((p) => delete p.birthDate), 422, 'required', 'Patient.birthDate'],
  ])('rejects %s with 422', (_name, resource, status, code, expression) => {
    expectIssue(resource, status, code, expression);
  });

  test('reports one issue per problem', () => {
    const result = validateResource(healthcareService((h) => (delete h.name, delete h.type)));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.issues.map((i) => i.expression?.[0])).toEqual(['HealthcareService.type', 'HealthcareService.name']);
  });

  test('reports syntax errors without the profile checks', () => {
    const result = validateResource(slot((s) => ((s.comment = ''), (s.end = '2027-01-01T08:00:00Z'))));
    expect(result).toMatchObject({ ok: false, status: 400 });
    if (result.ok) return;
    expect(result.issues.map((i) => [i.code, i.expression?.[0]])).toEqual([['structure', 'Slot.comment']]);
  });

  test('every issue carries severity, code, diagnostics and expression', () => {
    const result = validateResource(appointment((a) => (delete a.serviceType, (a.status = 'x' as 'booked'))));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    for (const issue of result.issues) {
      expect(issue).toEqual({
        severity: 'error',
        code: expect.any(String),
        diagnostics: expect.any(String),
        expression: [expect.any(String)],
      });
    }
  });

  test('checks nested resources of a Bundle against base R4', () => {
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: slot((s) => (s.status = 'open' as 'free')), request: { method: 'PUT', url: 'Slot/a' } }],
    };
    expectIssue(bundle, 422, 'code-invalid', 'Bundle.entry[0].resource.status');
  });

  describe('profile selection', () => {
    test('type-default applies the profile the repository requires for the type', () => {
      expectIssue(schedule((s) => delete s.active), 422, 'required', 'Schedule.active');
    });

    test('claimed checks only what meta.profile names', () => {
      const unclaimed = schedule((s) => delete s.active);
      expect(validateResource(unclaimed, { profiles: 'claimed' })).toEqual({ ok: true });
      const claimed = schedule((s) => ((s.meta = { profile: [`${ISIK}ISiKKalender`] }), delete s.active));
      expect(validateResource(claimed, { profiles: 'claimed' })).toMatchObject({ ok: false, status: 422 });
    });

    test('ISiKPatient applies to a Patient only when claimed (scheduling.md 1.4)', () => {
      expect(requiredProfile('Patient')).toBeUndefined();
      expect(validateResource(isikPatient((p) => (delete p.meta, delete p.gender)))).toEqual({ ok: true });
    });

    test('unknown claimed profiles are not checked', () => {
      const practitioner = { resourceType: 'Practitioner', meta: { profile: [`${ISIK}ISiKPersonImGesundheitsberuf`] } };
      expect(validateResource(practitioner)).toEqual({ ok: true });
    });

    test('a versioned canonical in meta.profile is recognised', () => {
      const claimed = { ...isikPatient((p) => delete p.gender), meta: { profile: [`${ISIK}ISiKPatient|6.0.0`] } };
      expectIssue(claimed, 422, 'required', 'Patient.gender');
    });
  });

  test('knownProfiles lists the ISiK canonicals of fhir-profiles/', () => {
    expect(knownProfiles()).toEqual([
      `${ISIK}ISiKKalender`,
      `${ISIK}ISiKMedizinischeBehandlungseinheit`,
      `${ISIK}ISiKPatient`,
      `${ISIK}ISiKTermin`,
      `${ISIK}ISiKTerminblock`,
    ]);
  });
});

function expectIssue(resource: unknown, status: 400 | 422, code: string, expression: string): void {
  const result = validateResource(resource);
  expect(result).toMatchObject({ ok: false, status });
  if (result.ok) return;
  expect(result.issues).toContainEqual(
    expect.objectContaining({ severity: 'error', code, expression: [expression] }),
  );
}
