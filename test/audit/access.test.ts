import type { AuditEvent, Bundle, CapabilityStatement } from '@medplum/fhirtypes';
import request from 'supertest';
import { handle } from '../../src/fhir/interactions';
import type { TestToken } from '../guard/helpers/get-token';
import { call, institution, pepHarness, type PepHarness } from '../guard/pep/helpers';
import { patientOf, patientToken, storedEvents, threePatients, userOf } from './helpers';

const OWNER = '1-AUDIT-ACCESS-OWNER';
const REQUESTOR = '1-AUDIT-ACCESS-REQUESTOR';
/** The KVNR of the fixture's Patient-Read-Example. */
const ERIKA = 'X485231029';

/**
 * Who reads the audit trail: owners search and read it, a patient finds the AuditEvents about
 * their own data, a requestor none; nobody writes it through the API.
 */
describe('AuditEvent through the FHIR API', () => {
  let h: PepHarness;
  let owner: TestToken;
  let requestor: TestToken;
  beforeAll(async () => {
    h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
    owner = await institution(h, { telematikId: OWNER });
    requestor = await institution(h, { telematikId: REQUESTOR });
    const ids = await threePatients(h);
    // Accesses to search for: the owner reads each appointment, the requestor searches slots.
    for (const id of ids) expect((await call(h, owner, 'GET', `/Appointment/${id}`)).status).toBe(200);
    expect((await call(h, requestor, 'GET', '/Slot?_count=3')).status).toBe(200);
    expect((await call(h, requestor, 'GET', '/Appointment/nope')).status).toBe(404);
    await h.terminus.audit.linkAll();
  });
  afterAll(() => h.close());

  const search = async (t: TestToken, query: string): Promise<Bundle<AuditEvent>> => {
    const res = await call(h, t, 'GET', `/AuditEvent?${query}`);
    expect([query, res.status, res.status === 200 ? undefined : res.body]).toEqual([query, 200, undefined]);
    return res.body as Bundle<AuditEvent>;
  };
  const resources = (b: Bundle<AuditEvent>) => (b.entry ?? []).map((e) => e.resource!);

  test('owners search by patient, agent identifier, type, subtype, action, outcome and date', async () => {
    const byPatient = resources(await search(owner, 'patient=Patient/audit-patient-B'));
    expect(byPatient.length).toBeGreaterThanOrEqual(1);
    for (const e of byPatient) expect(patientOf(e)).toBe('Patient/audit-patient-B');
    expect(resources(await search(owner, 'patient=audit-patient-B')).length).toBe(byPatient.length);

    const byRequestor = resources(await search(owner, `agent:identifier=https://gematik.de/fhir/sid/telematik-id|${REQUESTOR}`));
    expect(byRequestor.length).toBeGreaterThanOrEqual(2);
    for (const e of byRequestor) expect(userOf(e)?.who?.identifier?.value).toBe(REQUESTOR);
    expect(resources(await search(owner, `agent:identifier=${REQUESTOR}`)).length).toBe(byRequestor.length);

    const failed = resources(await search(owner, 'outcome=4&subtype=read'));
    expect(failed.map((e) => e.outcomeDesc?.slice(0, 3))).toContain('404');
    for (const e of resources(await search(owner, 'action=E&type=rest'))) expect(e.action).toBe('E');
    const security = resources(await search(owner, 'type=http://dicom.nema.org/resources/ontology/DCM|110114'));
    expect(security.map((e) => e.subtype?.[0].code)).toContain('token-issued');

    const today = h.ctx.now().toISOString().slice(0, 10);
    expect(resources(await search(owner, `date=${today}`)).length).toBeGreaterThan(5);
    expect(resources(await search(owner, 'date=lt2000-01-01'))).toEqual([]);
    expect(resources(await search(owner, 'entity=Appointment/audit-appt-C')).map(patientOf)).toContain('Patient/audit-patient-C');
  });

  test('pages: newest first, _count, and a cursor that new events do not shift', async () => {
    const all = (await storedEvents(h)).length;
    const first = await search(owner, '_count=3');
    expect(first.entry).toHaveLength(3);
    const dates = resources(first).map((e) => e.recorded);
    expect([...dates].sort().reverse()).toEqual(dates);
    const next = first.link?.find((l) => l.relation === 'next')?.url;
    expect(next).toBeDefined();
    // Events recorded meanwhile (this very search, and one more access) come before the cursor: the next page is the same.
    await call(h, requestor, 'GET', '/Slot?_count=1');
    const path = new URL(next!).pathname.replace(/^\/fhir/, '') + new URL(next!).search;
    const second = (await call(h, owner, 'GET', path)).body as Bundle<AuditEvent>;
    expect(second.entry).toHaveLength(3);
    expect(resources(second)[0].recorded <= dates[2]).toBe(true);
    expect(new Set([...resources(first), ...resources(second)].map((e) => e.id)).size).toBe(6);
    const ascending = resources(await search(owner, '_sort=date&_count=2'));
    expect(ascending[0].recorded <= ascending[1].recorded).toBe(true);
    expect(all).toBeGreaterThan(6);
  });

  test('read by id: owners only', async () => {
    const [e] = resources(await search(owner, '_count=1'));
    const read = await call(h, owner, 'GET', `/AuditEvent/${e.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(e);
    // A requestor holds no AuditEvent scope (policies/default.json): refused before the store is asked.
    expect((await call(h, requestor, 'GET', `/AuditEvent/${e.id}`)).status).toBe(403);
    expect((await call(h, owner, 'GET', '/AuditEvent/not-a-uuid')).status).toBe(404);
  });

  test('a patient finds exactly the AuditEvents about their own data; a requestor finds none', async () => {
    const erika = await patientToken(h, requestor, ERIKA);
    const own = resources(await search(erika, '_count=500'));
    expect(own.length).toBeGreaterThanOrEqual(1);
    for (const e of own) expect(patientOf(e)).toBe('Patient/Patient-Read-Example');
    expect(resources(await search(erika, 'patient=Patient/audit-patient-B'))).toEqual([]);
    const other = (await storedEvents(h)).find((e) => patientOf(e) === 'Patient/audit-patient-B')!;
    expect((await call(h, erika, 'GET', `/AuditEvent/${other.id}`)).status).toBe(404);
    const refused = await call(h, requestor, 'GET', '/AuditEvent?_count=500');
    expect([refused.status, refused.body.error]).toEqual([403, 'insufficient_scope']);
    // Should a deployment's policy grant requestors every scope, the store still shows them no AuditEvent.
    const wide = { institution: REQUESTOR, scopes: ['system/*.cruds'], isOwner: false };
    const answer = await handle({ method: 'GET', path: ['AuditEvent'], query: [['_count', '500']], headers: {}, caller: wide }, h.fhir);
    expect((answer.body as Bundle).entry).toEqual([]);
    const one = await handle({ method: 'GET', path: ['AuditEvent', own[0].id!], query: [], headers: {}, caller: wide }, h.fhir).catch((err: { status: number }) => err.status);
    expect(one).toBe(404);
  });

  test('nobody writes AuditEvents through the API: 405 with an OperationOutcome', async () => {
    const [e] = resources(await search(owner, '_count=1'));
    for (const [method, path] of [
      ['POST', '/AuditEvent'],
      ['PUT', `/AuditEvent/${e.id}`],
      ['DELETE', `/AuditEvent/${e.id}`],
    ] as const) {
      const res = await call(h, owner, method, path, method === 'DELETE' ? {} : { body: { ...e, outcome: '0' } });
      expect([method, res.status]).toEqual([method, 405]);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
    const patch = await call(h, owner, 'PATCH', `/AuditEvent/${e.id}`, { body: [{ op: 'replace', path: '/outcome', value: '0' }], contentType: 'application/json-patch+json' });
    expect([405, 403]).toContain(patch.status);
    expect((await call(h, owner, 'GET', `/AuditEvent/${e.id}`)).body).toEqual(e);
  });

  test('AuditEvent in a transaction or a batch entry: read in the Bundle\'s own transaction (an embedded store has one connection)', async () => {
    for (const type of ['transaction', 'batch']) {
      const bundle = { resourceType: 'Bundle', type, entry: [{ request: { method: 'GET', url: 'AuditEvent?_count=2' } }] };
      const res = await call(h, owner, 'POST', '', { body: bundle });
      expect([type, res.status]).toEqual([type, 200]);
      const inner = res.body.entry[0].resource as Bundle<AuditEvent>;
      expect(inner.entry).toHaveLength(2);
    }
  });

  test('bad search input: 400 naming the parameter', async () => {
    for (const [query, name] of [
      ['foo=bar', 'foo'],
      ['date=yesterday', 'date'],
      ['_count=x', '_count'],
      ['_sort=agent', '_sort'],
      ['_cursor=bm90IGEgY3Vyc29y', '_cursor'],
    ]) {
      const res = await call(h, owner, 'GET', `/AuditEvent?${query}`);
      expect([query, res.status]).toEqual([query, 400]);
      expect(res.body.issue[0].diagnostics).toContain(name);
    }
  });

  test('the CapabilityStatement lists AuditEvent with read and search-type', async () => {
    const cs = (await request(h.app).get('/fhir/metadata')).body as CapabilityStatement;
    const audit = cs.rest?.[0].resource?.find((r) => r.type === 'AuditEvent');
    expect(audit?.interaction?.map((i) => i.code).sort()).toEqual(['read', 'search-type']);
    expect(audit?.searchParam?.map((p) => p.name)).toEqual(expect.arrayContaining(['date', 'agent', 'entity', 'patient', 'type', 'subtype', 'action', 'outcome']));
  });
});
