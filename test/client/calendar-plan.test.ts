import { parseForm, windowsOf } from '../../src/client/ui/calendar-plan';
import { FhirError } from '../../src/client/ui/fhir';

/** The practice page's "new calendar" form: every refusal is a 400 OperationOutcome naming its field. */
const form = (o: Record<string, unknown> = {}) => ({
  name: 'Sprechstunde',
  actor: 'Practitioner/p1',
  serviceType: { system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '124', display: 'General Practice' },
  specialty: { system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'ALLG' },
  hours: { 1: [['08:00', '12:00']] },
  slotMinutes: 15,
  from: '2031-03-03',
  to: '2031-03-09',
  manualConfirmation: true,
  ...o,
});

function refusal(f: () => unknown): { status: number; field?: string; text?: string } {
  try {
    f();
  } catch (err) {
    if (err instanceof FhirError) return { status: err.status, field: err.outcome.issue[0].expression?.[0], text: err.outcome.issue[0].diagnostics };
    throw err;
  }
  throw new Error('not refused');
}

test('a complete form reads back as given; 16 slots of 15 minutes on one Monday morning', () => {
  const f = parseForm(form());
  expect(f).toMatchObject({ name: 'Sprechstunde', actor: 'Practitioner/p1', slotMinutes: 15, manualConfirmation: true });
  expect(windowsOf(f, 'Europe/Berlin')).toHaveLength(16);
});

test.each([
  ['no name', { name: '' }, 'name'],
  ['a name of 201 characters', { name: 'x'.repeat(201) }, 'name'],
  ['an actor that is a Patient', { actor: 'Patient/1' }, 'actor'],
  ['an actor with a query', { actor: 'Practitioner/1?x=1' }, 'actor'],
  ['no service type', { serviceType: undefined }, 'serviceType'],
  ['a specialty without code', { specialty: { system: 'http://x' } }, 'specialty'],
  ['hours as a list', { hours: [] }, 'hours'],
  ['hours with a number', { hours: { 1: [['08:00', 12]] } }, 'hours.1'],
])('refused with 400: %s', (_name, o, field) => {
  expect(refusal(() => parseForm(form(o)))).toMatchObject({ status: 400, field });
});

test.each([
  ['slots of 3 minutes', { slotMinutes: 3 }, 'slotMinutes'],
  ['a date that is not one', { from: 'tomorrow' }, 'from'],
  ['hours that overlap', { hours: { 1: [['08:00', '10:00'], ['09:00', '11:00']] } }, 'hours.1'],
  ['only closed days', { hours: { 6: [['08:00', '12:00']] }, from: '2031-03-03', to: '2031-03-04' }, 'hours'],
  ['more than 5000 slots', { hours: Object.fromEntries([1, 2, 3, 4, 5, 6, 7].map((d) => [d, [['00:00', '23:55']]])), slotMinutes: 5, from: '2031-01-01', to: '2031-03-01' }, 'to'],
])('no slot plan: %s', (_name, o, field) => {
  expect(refusal(() => windowsOf(parseForm(form(o)), 'Europe/Berlin'))).toMatchObject({ status: 400, field });
});
