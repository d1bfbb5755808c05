import { route } from '../../../src/fhir/interactions';
import { requiresPopp, reachRequiresPopp } from '../../../src/guard/pep/popp/popp-routes';
import { reachOf } from '../../../src/fhir/request-reach';
import type { Runner, ReachRequest } from '../../../src/common/fhir-reach';
import { requiredScopes } from '../../../src/guard/pep/required-scopes';
import { fhirOperations } from '../../../src/fhir/operations';

const OPERATIONS = fhirOperations();

const EVERYTHING = 'system/*.c system/*.r system/*.u system/*.d system/*.s';
const ACTORS = ['Practitioner', 'Patient', 'HealthcareService', 'PractitionerRole', 'RelatedPerson', 'Location'];
const ACTOR_TYPES = ACTORS.map((t) => `system/${t}.s`).join(' ');

/** `GET /Slot?a=b` as the enforcement point sees it. */
function get(pathAndQuery: string): ReachRequest {
  const u = new URL(pathAndQuery, 'http://x/');
  return { method: 'GET', path: u.pathname.split('/').filter(Boolean), query: [...u.searchParams.entries()] };
}

const entry = (method: string, url: string, resource?: unknown) => ({ request: { method, url }, ...(resource ? { resource } : {}) });
const bundle = (type: string, ...entries: unknown[]) => ({ resourceType: 'Bundle', type, entry: entries });
const post = (body: unknown): ReachRequest => ({ method: 'POST', path: [], query: [], body });

function nestedBatches(depth: number, innermost: unknown): unknown {
  let b = innermost;
  for (let i = 0; i < depth; i++) b = bundle('batch', entry('POST', '/', b));
  return b;
}

const needsOf = (req: ReachRequest, runner: Runner = 'embedded') => requiredScopes(reachOf(req, route({ ...req, headers: {} }), OPERATIONS, runner)).join(' ');

/** What reaches other types through the query or a Bundle needs their scopes too. */
describe('required scopes of a request', () => {
  const table: [string, ReachRequest, string][] = [
    ['a plain search', get('/Slot?status=free'), 'system/Slot.s'],
    ['_revinclude: the including type', get('/Slot?_id=X&_revinclude=Appointment:slot'), 'system/Slot.s system/Appointment.s'],
    ['_include: the FHIR layer returns only what the token may read, so nothing more', get('/Appointment?_include=Appointment:patient'), 'system/Appointment.s'],
    ['_include with a :Type suffix', get('/Appointment?_include=Appointment:actor:Location'), 'system/Appointment.s'],
    ['_include of a multi-target reference without suffix', get('/Appointment?_include=Appointment:actor'), 'system/Appointment.s'],
    ['_include:iterate', get('/Slot?_include:iterate=Slot:schedule'), 'system/Slot.s'],
    ['_has', get('/Slot?_has:Appointment:slot:status=booked'), 'system/Slot.s system/Appointment.s'],
    ['a typed chain', get('/Slot?schedule.actor:HealthcareService.type=http://s|1'), 'system/Slot.s system/Schedule.s system/HealthcareService.s'],
    ['an untyped chain over a single-target reference', get('/Appointment?slot.status=busy'), 'system/Appointment.s system/Slot.s'],
    ['an untyped chain over a multi-target reference: all its targets', get('/Slot?schedule.actor.name=X'), `system/Slot.s system/Schedule.s ${ACTOR_TYPES}`],
    ['a link past a multi-target one: any type', get('/Slot?schedule.actor.organization.name=X'), `system/Slot.s system/Schedule.s ${ACTOR_TYPES} system/*.s`],
    ['a search the store cannot parse: our FHIR layer answers 400 and runs nothing', get('/Slot?start=not-a-date'), 'system/Slot.s'],
    [
      'POST _search: form parameters count',
      { method: 'POST', path: ['Slot', '_search'], query: [['_id', 'X'], ['_revinclude', 'Appointment:slot']] },
      'system/Slot.s system/Appointment.s',
    ],
    ['a search entry of a batch with _revinclude', post(bundle('batch', entry('GET', 'Slot?_revinclude=Appointment:slot'))), 'system/Slot.s system/Appointment.s'],
    ['a search entry of a transaction with a chain', post(bundle('transaction', entry('GET', 'Slot?schedule.actor:Practitioner.name=X'))), 'system/Slot.s system/Schedule.s system/Practitioner.s'],
    ['a batch nested in a batch: everything', post(nestedBatches(1, bundle('batch', entry('DELETE', 'Slot/s1')))), EVERYTHING],
    ['five nested batches: everything', post(nestedBatches(5, bundle('batch', entry('DELETE', 'Slot/s1')))), EVERYTHING],
    ['a transaction nested in a batch: everything', post(bundle('batch', entry('POST', '/', bundle('transaction', entry('DELETE', 'Schedule/s1'))))), EVERYTHING],
    ['an entry that does not route: everything', post(bundle('batch', entry('GET', 'Slot/s1'), entry('GET', 'Nonsense/x'))), `system/Slot.r ${EVERYTHING}`],
    ['an entry without request.url: everything', post(bundle('batch', { request: { method: 'GET' } })), EVERYTHING],
    ['a $book entry of a batch: what $book declares', post(bundle('batch', entry('POST', 'Appointment/$book', { resourceType: 'Appointment' }))), 'system/Appointment.c'],
    ['an instance $events entry: what $events declares', post(bundle('batch', entry('GET', 'Subscription/s1/$events'))), 'system/Subscription.r'],
    ['an operation this server does not have, in a batch: every permission on its type', post(bundle('batch', entry('POST', 'Slot/$lock'))), 'system/Slot.c system/Slot.r system/Slot.u system/Slot.d system/Slot.s'],
  ];

  test.each(table)('%s', (_name, req, needs) => {
    expect(needsOf(req)).toBe(needs);
  });

  // Proxy mode: the upstream may read what the enforcement point cannot, so that fails closed.
  const upstream: [string, ReachRequest, string][] = [
    ['a search the store cannot parse', get('/Slot?start=not-a-date'), `system/Slot.s ${EVERYTHING}`],
    ['a transaction whose Bundle cannot be read', post(undefined), EVERYTHING],
    ['a batch that is not a Bundle', post({ resourceType: 'Parameters' }), EVERYTHING],
  ];
  test.each(upstream)('for an upstream, %s: everything', (_name, req, needs) => {
    expect(needsOf(req, 'upstream')).toBe(needs);
  });
  test('for our own FHIR layer, a Bundle it cannot read needs nothing more (it answers 400)', () => {
    expect(needsOf(post(undefined))).toBe('');
  });
});

/** Review hole 3: PoPP is required wherever the request reaches a listed route. */
describe('PoPP over the reach of a request', () => {
  const routes = ['Patient', 'Appointment/$book'];
  const popp = (req: ReachRequest) => reachRequiresPopp(routes, reachOf(req, route({ ...req, headers: {} }), OPERATIONS));

  const table: [string, boolean, ReachRequest][] = [
    ['a Slot search', false, get('/Slot?status=free')],
    ['_include=Appointment:patient', true, get('/Appointment?_include=Appointment:patient')],
    ['_include of every actor type', true, get('/Appointment?_include=Appointment:actor')],
    ['_include limited to Location', false, get('/Appointment?_include=Appointment:actor:Location')],
    ['_revinclude of Patients', true, get('/RelatedPerson?_revinclude=Patient:link')],
    ['a chain through Patient', true, get('/Appointment?patient.name=X')],
    ['_has:Patient', true, get('/Practitioner?_has:Patient:general-practitioner:name=X')],
    ['a batch with Appointment/$book', true, post(bundle('batch', entry('POST', 'Appointment/$book', { resourceType: 'Parameters' })))],
    ['a batch reading a Patient', true, post(bundle('batch', entry('GET', 'Slot/s1'), entry('GET', 'Patient/x')))],
    ['a batch including Patients', true, post(bundle('batch', entry('GET', 'Appointment?_include=Appointment:patient')))],
    ['a batch of Slot reads', false, post(bundle('batch', entry('GET', 'Slot/s1')))],
    ['a nested batch', true, post(nestedBatches(2, bundle('batch', entry('GET', 'Slot/s1'))))],
  ];

  test.each(table)('%s: PoPP required %s', (_name, required, req) => {
    expect(popp(req)).toBe(required);
  });

  test('no POPP_REQUIRED_ROUTES: nothing needs one, not even what cannot be followed', () => {
    const req = post(nestedBatches(2, bundle('batch', entry('GET', 'Patient/x'))));
    expect(reachRequiresPopp([], reachOf(req, route({ ...req, headers: {} }), OPERATIONS))).toBe(false);
    expect(requiresPopp(routes, { interaction: 'read', type: 'Slot', id: 's1' })).toBe(false);
  });
});
