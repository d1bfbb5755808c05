import fs from 'node:fs';
import path from 'node:path';
import type { Appointment, Bundle, Encounter, Resource, Schedule, Slot } from '@medplum/fhirtypes';
import { validateResource } from '../src/model/validation';

const bundle = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'isik-stufe5.json'), 'utf8')) as Bundle;
const resources = (bundle.entry ?? []).map((e) => e.resource as Resource);
const byId = <T extends Resource>(type: T['resourceType'], id: string): T => {
  const found = resources.find((r) => r.resourceType === type && r.id === id);
  if (!found) throw new Error(`${type}/${id} missing from the fixture`);
  return found as T;
};

describe('fixtures/isik-stufe5.json (scheduling.md section 5)', () => {
  test('is a valid transaction Bundle of PUT entries that keep the ids', () => {
    expect(validateResource(bundle)).toEqual({ ok: true });
    expect(bundle.type).toBe('transaction');
    for (const entry of bundle.entry ?? []) {
      const r = entry.resource as Resource;
      expect(entry.request).toEqual({ method: 'PUT', url: `${r.resourceType}/${r.id}` });
    }
  });

  test.each(resources.map((r) => [`${r.resourceType}/${r.id}`, r] as const))('%s is valid', (_id, resource) => {
    expect(validateResource(resource)).toEqual({ ok: true });
  });

  test.each([
    ['Patient', 'Patient-Read-Example'],
    ['Practitioner', 'Practitioner-Read-Example'],
    ['Schedule', 'Schedule-Read-Example'],
    ['Slot', 'Slot-Read-Example'],
    ['Slot', 'Slot-Free-Example'],
    ['Appointment', 'Appointment-Read-Example'],
    ['HealthcareService', 'HealthcareService-Read-Example'],
    ['Encounter', 'Encounter-Read-Planned-Example'],
    ['CodeSystem', 'CodeSystem-Read-Example'],
  ] as const)('holds %s/%s', (type, id) => {
    expect(() => byId(type, id)).not.toThrow();
  });

  test('Schedule-Read-Example is S5-1 ready', () => {
    const s = byId<Schedule>('Schedule', 'Schedule-Read-Example');
    expect(s.active).toBe(true);
    expect(s.serviceType?.[0]).toMatchObject({ text: expect.any(String), coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] });
    expect(s.specialty?.[0].coding).toContainEqual(expect.objectContaining({ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' }));
    expect(s.actor).toEqual([{ reference: 'Practitioner/Practitioner-Read-Example', display: expect.any(String) }]);
    expect(s.extension?.find((e) => e.url === 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name')?.valueString).toBeTruthy();
  });

  test('slots for S5-3, S5-7 and S5-8 are in place', () => {
    expect(byId<Slot>('Slot', 'Slot-Read-Example')).toMatchObject({ status: 'busy', schedule: { reference: 'Schedule/Schedule-Read-Example' }, start: expect.stringContaining('2027-01-01') });
    expect(byId<Slot>('Slot', 'Slot-Free-Example')).toMatchObject({ status: 'free', start: '2027-01-01T09:00:00Z', end: '2027-01-01T20:00:00Z' });
    const bySchedule = resources.filter(
      (r): r is Slot =>
        r.resourceType === 'Slot' && r.status === 'free' && r.schedule.reference === 'Schedule/Schedule-Read-Example' &&
        Date.parse(r.start) <= Date.parse('2027-01-31T11:05:00Z') && Date.parse(r.end) >= Date.parse('2027-01-31T11:55:00Z'),
    );
    expect(bySchedule).toHaveLength(1);
  });

  test('Appointment-Read-Example carries every S5-5 field', () => {
    const a = byId<Appointment>('Appointment', 'Appointment-Read-Example');
    const slot = byId<Slot>('Slot', 'Slot-Read-Example');
    expect(a.meta?.tag).toContainEqual({ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' });
    const replaces = a.extension?.find((e) => e.url === 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces');
    const replaced = replaces?.valueReference?.reference?.split('/')[1] ?? '';
    expect(byId<Appointment>('Appointment', replaced).status).toBe('cancelled');
    expect(a.status).toBe('cancelled');
    expect(a.cancelationReason?.coding?.[0].code).toBe('pat');
    expect(a.serviceType?.[0].coding).toContainEqual(expect.objectContaining({ code: '177' }));
    expect(a.specialty?.[0].coding?.[0].code).toBe('NEUR');
    expect((a as Appointment & { _priority?: { extension?: { valueCodeableConcept?: { coding?: unknown[] } }[] } })._priority?.extension?.[0].valueCodeableConcept?.coding).toContainEqual(
      expect.objectContaining({ system: 'http://snomed.info/sct', code: '394848005', version: 'http://snomed.info/sct/11000274103/version/20251115' }),
    );
    expect(a.comment).toBeTruthy();
    expect(a.patientInstruction).toBeTruthy();
    expect([a.start, a.end]).toEqual([slot.start, slot.end]);
    expect(a.slot).toEqual([{ reference: 'Slot/Slot-Read-Example' }]);
    expect(a.participant).toContainEqual(expect.objectContaining({ actor: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' } }));
  });

  test('the patient is ISiKPatient-conformant by claim', () => {
    expect(byId('Patient', 'Patient-Read-Example').meta?.profile).toContain('https://gematik.de/fhir/isik/StructureDefinition/ISiKPatient');
  });

  test('Encounter-Read-Planned-Example is S5-11 ready', () => {
    const e = byId<Encounter>('Encounter', 'Encounter-Read-Planned-Example');
    expect(e.status).toBe('planned');
    expect(e.appointment).toEqual([{ reference: 'Appointment/Appointment-Read-Example' }]);
    expect(e.subject?.reference).toBe('Patient/Patient-Read-Example');
    expect(e.period).toBeUndefined();
  });

  test('every reference inside the fixture resolves within it', () => {
    const ids = new Set(resources.map((r) => `${r.resourceType}/${r.id}`));
    const refs = JSON.stringify(resources).match(/"reference":"[^"]+"/g) ?? [];
    for (const ref of refs) expect(ids).toContain(JSON.parse(`{${ref}}`).reference);
  });
});
