import type { TestToken } from '../helpers/get-token';
import { freeSlot, proposal } from '../../booking/builders';
import { call, institution, pepHarness, type PepHarness } from './helpers';

const OWNER = '1-PEP-OWNER';

/** Every FHIR interaction needs its SMART v2 scope (docs/requirements.md#identity-scopes-and-ownership); without it 403 insufficient_scope. */
describe('scopes per interaction', () => {
  let h: PepHarness;
  let narrow: TestToken;
  let requestor: TestToken;
  let owner: TestToken;
  beforeAll(async () => {
    h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true });
    narrow = await institution(h, { telematikId: '1-PEP-SCOPE', scope: 'system/Slot.rs' });
    requestor = await institution(h, { telematikId: '1-PEP-SCOPE' });
    owner = await institution(h, { telematikId: OWNER });
  });
  afterAll(() => h.close());

  const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.comment' }, { name: 'value', valueString: 'x' }] }] };
  const transaction = {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [
      { fullUrl: 'urn:uuid:0c4d5b0e-0000-4000-8000-000000000001', resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
      { resource: { ...proposal(), id: 'tx-appt' }, request: { method: 'PUT', url: 'Appointment/tx-appt' } },
      { request: { method: 'GET', url: 'Slot/Slot-Free-Example' } },
    ],
  };
  const nestedBatch = {
    resourceType: 'Bundle',
    type: 'batch',
    entry: [{ resource: { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Schedule/Schedule-Read-Example' } }] }, request: { method: 'POST', url: '/' } }],
  };
  // Review hole 1: five batches deep, a DELETE the old walk (depth > 3) never saw.
  let deepBatch: unknown = { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'DELETE', url: 'Slot/Slot-Free-Example' } }] };
  for (let i = 0; i < 5; i++) deepBatch = { resourceType: 'Bundle', type: 'batch', entry: [{ resource: deepBatch, request: { method: 'POST', url: '/' } }] };
  const batchOf = (...urls: string[]) => ({ resourceType: 'Bundle', type: 'batch', entry: urls.map((url) => ({ request: { method: 'GET', url } })) });
  const EVERYTHING = 'system/*.c system/*.r system/*.u system/*.d system/*.s';

  const table: [string, string, string, unknown, string][] = [
    ['read', 'GET', '/Appointment/a1', undefined, 'system/Appointment.r'],
    ['vread', 'GET', '/Appointment/a1/_history/1', undefined, 'system/Appointment.r'],
    ['history', 'GET', '/Appointment/a1/_history', undefined, 'system/Appointment.r'],
    ['search', 'GET', '/Appointment?status=booked', undefined, 'system/Appointment.s'],
    ['search by POST', 'POST', '/Appointment/_search', 'status=booked', 'system/Appointment.s'],
    ['create', 'POST', '/Appointment', proposal(), 'system/Appointment.c'],
    ['update', 'PUT', '/Appointment/a1', { ...proposal(), id: 'a1' }, 'system/Appointment.u'],
    ['patch', 'PATCH', '/Appointment/a1', patch, 'system/Appointment.u'],
    ['delete', 'DELETE', '/Appointment/a1', undefined, 'system/Appointment.d'],
    ['$book', 'POST', '/Appointment/$book', proposal(), 'system/Appointment.c'],
    ['$status of one subscription', 'GET', '/Subscription/s1/$status', undefined, 'system/Subscription.r'],
    ['$status over subscriptions', 'GET', '/Subscription/$status', undefined, 'system/Subscription.s'],
    ['$events', 'GET', '/Subscription/s1/$events', undefined, 'system/Subscription.r'],
    ['transaction: the scopes of all entries', 'POST', '', transaction, 'system/Patient.c system/Appointment.u'],
    ['batch with a nested transaction: a Bundle the FHIR layer refuses needs everything', 'POST', '/', nestedBatch, EVERYTHING],
    ['five nested batches', 'POST', '/', deepBatch, EVERYTHING],
    ['batch with an entry that does not route', 'POST', '/', batchOf('Slot/Slot-Free-Example', 'Nonsense/x'), EVERYTHING],
    ['_revinclude: the including type', 'GET', '/Slot?_id=Slot-Free-Example&_revinclude=Appointment:slot', undefined, 'system/Appointment.s'],
    ['_has: the referring type', 'GET', '/Slot?_has:Appointment:slot:status=booked', undefined, 'system/Appointment.s'],
    ['a chain: every type on the way', 'GET', '/Slot?schedule.actor:HealthcareService.type=http://s|1', undefined, 'system/Schedule.s system/HealthcareService.s'],
    ['_revinclude in a POST _search form', 'POST', '/Slot/_search', '_id=Slot-Free-Example&_revinclude=Appointment:slot', 'system/Appointment.s'],
    ['_revinclude in a batch entry', 'POST', '/', batchOf('Slot?_id=Slot-Free-Example&_revinclude=Appointment:slot'), 'system/Appointment.s'],
  ];

  test.each([
    ['type level', '/Slot/$lock'],
    ['system level', '/$purge'],
  ])('an operation this server does not have (%s): 404 not-supported before any scope check', async (_name, path) => {
    const res = await call(h, narrow, 'POST', path, { body: {} });
    expect(res.status).toBe(404);
    expect(res.body.issue[0].code).toBe('not-supported');
  });

  test.each(table)('%s (%s %s) without its scope → 403 insufficient_scope', async (_name, method, path, body, missing) => {
    const res = await call(h, narrow, method, path, {
      body,
      contentType: typeof body === 'string' ? 'application/x-www-form-urlencoded' : undefined,
    });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('insufficient_scope');
    expect(res.headers['www-authenticate']).toBe(`DPoP error="insufficient_scope", scope="${missing}", algs="ES256"`);
  });

  test('_include brings only what the token may read: the Slots, not their Schedule, with a warning', async () => {
    const res = await call(h, narrow, 'GET', '/Slot?_id=Slot-Free-Example&_include=Slot:schedule');
    expect(res.status).toBe(200);
    const entries = (res.body.entry ?? []) as { resource: { resourceType: string; issue?: { code: string; diagnostics: string }[] }; search: { mode: string } }[];
    expect(entries.filter((e) => e.search.mode !== 'outcome').map((e) => `${e.search.mode} ${e.resource.resourceType}`)).toEqual(['match Slot']);
    const warning = entries.find((e) => e.search.mode === 'outcome')?.resource.issue?.[0];
    expect(warning?.code).toBe('forbidden');
    expect(warning?.diagnostics).toMatch(/no read scope for Schedule/);
  });

  test('a requestor may use the ISiK include Appointment:actor (default scopes)', async () => {
    const res = await call(h, requestor, 'GET', '/Appointment?_include=Appointment:actor');
    expect([res.status, res.body.resourceType]).toEqual([200, 'Bundle']);
  });

  test('the narrow token does what its scope allows (Slot read and search)', async () => {
    expect((await call(h, narrow, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
    expect((await call(h, narrow, 'GET', '/Slot?schedule=Schedule-Read-Example&status=free')).status).toBe(200);
  });

  const requestorRefused: [string, string, string, unknown, string][] = [
    ['search Patients (Patient.cr has no s)', 'GET', '/Patient', undefined, 'system/Patient.s'],
    ['chain through Patient', 'GET', '/Appointment?patient.name=Privat', undefined, 'system/Patient.s'],
    ['delete an Appointment', 'DELETE', '/Appointment/a1', undefined, 'system/Appointment.d'],
    ['change a Slot', 'PUT', '/Slot/Slot-Free-Example', freeSlot('Slot-Free-Example', '2027-01-01T11:00:00Z', '2027-01-01T12:00:00Z'), 'system/Slot.u'],
    ['import by transaction', 'POST', '', { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: freeSlot('imp-1', '2027-03-01T08:00:00Z', '2027-03-01T08:15:00Z'), request: { method: 'PUT', url: 'Slot/imp-1' } }] }, 'system/Slot.u'],
  ];

  test.each(requestorRefused)('a requestor (default scopes) may not %s', async (_name, method, path, body, missing) => {
    const res = await call(h, requestor, method, path, { body });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('insufficient_scope');
    expect(res.headers['www-authenticate']).toBe(`DPoP error="insufficient_scope", scope="${missing}", algs="ES256"`);
  });

  test('the deep batch reaches the FHIR layer only with system/*.cruds, which refuses the nesting; the Slot stays', async () => {
    const res = await call(h, owner, 'POST', '/', { body: deepBatch });
    expect(res.status).toBe(200);
    expect(res.body.entry[0].response.status).toBe('400 Bad Request');
    expect((await call(h, narrow, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
  });

  test('an include within the token\'s scope passes (Slot.rs: Slots revincluding Slots)', async () => {
    const res = await call(h, narrow, 'GET', '/Slot?_id=Slot-Free-Example&_revinclude=Slot:schedule');
    expect(res.status).toBe(200);
    expect(res.body.resourceType).toBe('Bundle');
  });

  test('a repository owner (system/*.cruds) may import by transaction', async () => {
    const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: freeSlot('imp-2', '2027-03-01T08:00:00Z', '2027-03-01T08:15:00Z'), request: { method: 'PUT', url: 'Slot/imp-2' } }] };
    const res = await call(h, owner, 'POST', '', { body: bundle });
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('transaction-response');
  });

  test('async polling needs the scope of the polled request', async () => {
    const kickoff = await call(h, requestor, 'POST', '/Appointment/$book', { body: proposal(), headers: { Prefer: 'respond-async' } });
    expect(kickoff.status).toBe(202);
    const location = new URL(kickoff.headers['content-location']).pathname.replace(/^\/fhir/, '');
    const refused = await call(h, narrow, 'GET', location);
    expect(refused.status).toBe(403);
    expect(refused.headers['www-authenticate']).toBe('DPoP error="insufficient_scope", scope="system/Appointment.c", algs="ES256"');
    const polled = await call(h, requestor, 'GET', location);
    expect([200, 201, 202]).toContain(polled.status);
  });

  test('GET /fhir/metadata stays public', async () => {
    const res = await call(h, requestor, 'GET', '/metadata', { scheme: null, proof: null });
    expect(res.status).toBe(200);
    expect(res.body.resourceType).toBe('CapabilityStatement');
  });
});
