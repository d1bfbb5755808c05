import type { Resource } from '@medplum/fhirtypes';
import { compiledFhirPath, evalFhirPathTyped, memberValues, singleTypeMemberValues, toTypedValue, type TypedValue } from '../../src/server-lib/medplum';
import { demoResources } from '../../src/demo';
import { absent, extractIndexRows, resolvedType } from '../../src/store/search/extract';
import { RESOURCE_TYPES, searchParams } from '../../src/store/search/parameters';

/**
 * Index extraction skips a search parameter whose path the resource's JSON shows empty,
 * and walks plain paths member by member instead of evaluating them. Neither may change a row:
 * wherever `absent` says so, FHIRPath finds nothing, and a member step finds what FHIRPath finds.
 */
const resources: Resource[] = [
  ...demoResources(new Date('2026-11-26T08:00:00Z')).filter((r, i, all) => all.findIndex((x) => x.resourceType === r.resourceType) === i || r.resourceType !== 'Slot'),
  {
    resourceType: 'Appointment',
    id: 'a1',
    meta: { tag: [{ system: 'urn:t', code: 'x' }], security: [{ system: 'urn:s', code: 'R' }] },
    status: 'booked',
    _start: { extension: [{ url: 'urn:e', valueString: 'unknown' }] },
    participant: [{ status: 'accepted' }, { actor: { reference: 'Patient/p1' }, status: 'accepted' }, { actor: { display: 'no reference' }, status: 'needs-action' }],
    slot: [{ reference: 'Slot/s1' }],
    reasonCode: [{ text: 'no coding' }],
    supportingInformation: [{ reference: 'QuestionnaireResponse/q1' }],
  } as Resource,
  { resourceType: 'Appointment', id: 'a2', _status: { extension: [{ url: 'urn:e', valueCode: 'x' }] }, participant: [] } as unknown as Resource,
  {
    resourceType: 'Patient',
    id: 'p1',
    deceasedDateTime: '2020-01-01',
    name: [{ family: 'Müller', given: ['Anna'] }],
    telecom: [{ system: 'email', value: 'a@example.org' }],
    address: [{ city: 'Berlin' }],
    identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: 'A123456789' }],
  },
  { resourceType: 'Patient', id: 'p2', deceasedBoolean: false, gender: 'female', birthDate: '1970' },
  { resourceType: 'QuestionnaireResponse', id: 'q1', status: 'completed', subject: { reference: 'Patient/p1' }, item: [{ linkId: '1', answer: [{ valueString: 'x' }] }] },
  { resourceType: 'Encounter', id: 'e1', status: 'planned', class: { code: 'AMB' }, subject: { reference: 'Patient/p1' }, participant: [{ individual: { reference: 'Practitioner/d1' } }] },
  { resourceType: 'Slot', id: 's1', schedule: { reference: 'Schedule/x' }, status: 'free', start: '2031-01-01T08:00:00Z', end: '2031-01-01T08:15:00Z', _status: { extension: [{ url: 'urn:e', valueString: 'y' }] } } as Resource,
];

// First in this file, before anything else here has loaded medplum's schema.
test('a patient\'s identifier and e-mail are indexed although nothing in this process validated a resource first', () => {
  const rows = extractIndexRows({ resourceType: 'Patient', id: 'p9', identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: 'B987654321' }], telecom: [{ system: 'email', value: 'b@example.org' }] });
  expect(rows.tokens.map((t) => `${t.param} ${t.system ?? ''}|${t.code ?? ''}`).sort()).toEqual([
    'deceased |false',
    'email email|b@example.org',
    'identifier http://fhir.de/sid/gkv/kvid-10|B987654321',
    'telecom email|b@example.org',
  ]);
});

test('a parameter skipped as absent finds nothing with FHIRPath, for every parameter of every stored type', () => {
  let skipped = 0;
  let evaluated = 0;
  for (const resource of resources) {
    const root = [toTypedValue(resource)];
    for (const def of searchParams(resource.resourceType).values()) {
      const found = evalFhirPathTyped(compiledFhirPath(def.expression), root);
      if (absent(resource, def.expression)) {
        skipped++;
        expect({ param: `${resource.resourceType}.${def.code}`, found }).toEqual({ param: `${resource.resourceType}.${def.code}`, found: [] });
      } else {
        evaluated++;
      }
    }
  }
  // Most parameters name elements a resource does not have: that is what the shortcut saves.
  expect(skipped).toBeGreaterThan(evaluated);
  expect(new Set(resources.map((r) => r.resourceType)).size).toBeGreaterThanOrEqual(RESOURCE_TYPES.length - 5);
});

test('what absent cannot tell is evaluated: choice forms, primitive extensions, members of primitives, other shapes', () => {
  const appointment = resources.find((r) => r.id === 'a1')!;
  expect(absent(appointment, 'Appointment.start')).toBe(false); // `_start` carries an extension
  expect(absent(appointment, 'Appointment.status.extension')).toBe(false);
  expect(absent(appointment, 'Appointment.participant.period')).toBe(true);
  expect(absent(appointment, 'Appointment.participant.actor.where(resolve() is Patient)')).toBe(false);
  expect(absent(resources.find((r) => r.id === 'a2')!, 'Appointment.participant.actor.where(resolve() is Patient)')).toBe(true); // an empty array
  const patient = resources.find((r) => r.id === 'p1')!;
  expect(absent(patient, 'Patient.deceased')).toBe(false); // deceasedDateTime
  expect(absent(patient, 'Patient.gender')).toBe(true);
  expect(absent(patient, 'Slot.status')).toBe(false); // another type's path
  expect(absent(patient, 'Patient.name.family | Patient.name.given')).toBe(false);
  expect(absent(patient, 'Patient.link.other.exists()')).toBe(false);
});

test('index rows are what FHIRPath gives for each parameter', () => {
  const rows = extractIndexRows(resources.find((r) => r.id === 'a1')!, 'http://localhost/fhir');
  expect(rows.tokens.map((t) => `${t.param} ${t.system ?? ''}|${t.code ?? ''}`).sort()).toEqual([
    '_security urn:s|R',
    '_tag urn:t|x',
    'part-status http://hl7.org/fhir/participationstatus|accepted',
    'part-status http://hl7.org/fhir/participationstatus|needs-action',
    'status http://hl7.org/fhir/appointmentstatus|booked',
  ]);
  expect(rows.references.map((r) => `${r.param} ${r.targetUrl}`).sort()).toEqual(['actor Patient/p1', 'patient Patient/p1', 'slot Slot/s1', 'supporting-info QuestionnaireResponse/q1']);
  expect(rows.dates).toEqual([]);
  // A primitive with an extension keeps its token (medplum's typed step wraps it in a String object).
  const slot = extractIndexRows(resources.find((r) => r.id === 's1')!);
  expect(slot.tokens.filter((t) => t.param === 'status').map((t) => `${t.system}|${t.code}`)).toEqual(['http://hl7.org/fhir/slotstatus|free']);
});

test('a member step finds what FHIRPath finds for that name, on every element of every resource', () => {
  let compared = 0;
  let read = 0;
  const walk = (node: TypedValue, depth: number) => {
    const value = node.value as Record<string, unknown>;
    if (!value || typeof value !== 'object' || depth > 4) return;
    const names = new Set([...Object.keys(value).map((k) => k.replace(/^_/, '').replace(/(Boolean|DateTime|String|Quantity|Code)$/, '')), 'id', 'extension', 'value', 'missing']);
    for (const name of names) {
      const direct = memberValues([node], name);
      expect({ at: `${node.type}.${name}`, found: direct }).toEqual({ at: `${node.type}.${name}`, found: evalFhirPathTyped(compiledFhirPath(name), [node]) });
      compared++;
      const single = singleTypeMemberValues([node], name);
      if (single !== undefined) {
        expect({ at: `${node.type}.${name}`, found: single }).toEqual({ at: `${node.type}.${name}`, found: direct.map(({ type, value }) => ({ type, value })) });
        read++;
      }
      for (const child of direct) walk(child, depth + 1);
    }
  };
  for (const resource of resources) walk(toTypedValue(resource), 0);
  expect(compared).toBeGreaterThan(300);
  // Most steps are read straight from the JSON; the rest (choices, primitive extensions) go through medplum.
  expect(read).toBeGreaterThan(compared / 2);
});

test('the single-type step leaves to medplum what it cannot tell: a primitive\'s extension, a choice element', () => {
  const appointment = toTypedValue(resources.find((r) => r.id === 'a1')!);
  expect(singleTypeMemberValues([appointment], 'start')).toBeUndefined(); // `_start`
  const patient = toTypedValue(resources.find((r) => r.id === 'p1')!);
  expect(singleTypeMemberValues([patient], 'deceased')).toBeUndefined(); // deceasedDateTime
  expect(singleTypeMemberValues([patient], 'gender')).toEqual([]);
  expect(singleTypeMemberValues([patient], 'name')).toEqual([{ type: 'HumanName', value: { family: 'Müller', given: ['Anna'] } }]);
});

test('where(resolve() is T) keeps the references FHIRPath keeps, for every shape of reference', () => {
  const actors: unknown[] = [
    { reference: 'Patient/p1' },
    { reference: 'Practitioner/d1' },
    { reference: 'Patient/p1/_history/2' },
    { reference: 'http://other.example/fhir/Patient/p1' },
    { reference: 'urn:uuid:0b7d0c8e-1111-4c5e-9a43-2a6b1f1c1234' },
    { reference: '#contained' },
    { reference: 'p1' },
    { reference: 'Patient?identifier=http://fhir.de/sid/gkv/kvid-10|A123456789' },
    { reference: '' , type: 'Patient', identifier: { system: 'urn:s', value: 'v' } },
    { type: 'Patient', identifier: { system: 'urn:s', value: 'v' } },
    { type: 'Patient' },
    { display: 'only a name' },
    { reference: 'Location/room-1', type: 'Patient' },
  ];
  let kept = 0;
  for (const target of ['Patient', 'Practitioner', 'Location']) {
    const expression = `Appointment.participant.actor.where(resolve() is ${target})`;
    for (const actor of actors) {
      const appointment = { resourceType: 'Appointment', id: 'r', status: 'booked', participant: [{ actor, status: 'accepted' }] } as Resource;
      const fhirpath = evalFhirPathTyped(compiledFhirPath(expression), [toTypedValue(appointment)]).map((v) => v.value);
      const here = fhirpath.length > 0;
      expect({ target, actor, kept: resolvedType(actor) === target }).toEqual({ target, actor, kept: here });
      const param = { Patient: 'patient', Practitioner: 'practitioner', Location: 'location' }[target]!;
      const rows = extractIndexRows(appointment).references.filter((r) => r.param === param);
      expect({ target, actor, rows: rows.length }).toEqual({ target, actor, rows: here && (actor as { reference?: string }).reference ? 1 : 0 });
      if (here) kept++;
    }
  }
  expect(kept).toBeGreaterThanOrEqual(6);
});
