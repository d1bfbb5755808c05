import type { Bundle } from '@medplum/fhirtypes';
import type { TestToken } from '../helpers/get-token';
import { parameters, proposal } from '../../booking/builders';
import { importResources } from '../../../src/fhir/import';
import { call, institution, pepHarness, type PepHarness } from './helpers';

const OWNER = '1-PEP-PRACTICE';

/**
 * Ownership (docs/requirements.md#identity-scopes-and-ownership) end to end through the enforcement
 * point: the Telematik-ID of the token owns what it books; another institution finds nothing (404,
 * absent from searches, includes, chains and `_has`, patches and re-books); the institution itself
 * and the repository owners see it.
 */
describe('institution isolation', () => {
  let h: PepHarness;
  let a: TestToken;
  let b: TestToken;
  let owner: TestToken;
  let apptId: string;
  beforeAll(async () => {
    h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true });
    a = await institution(h, { telematikId: '1-PEP-INST-A' });
    b = await institution(h, { telematikId: '1-PEP-INST-B', professionOid: '1.2.276.0.76.4.51' });
    owner = await institution(h, { telematikId: OWNER });
    const booked = await call(h, a, 'POST', '/Appointment/$book', { body: proposal() });
    expect(booked.status).toBe(201);
    apptId = booked.body.id;
  });
  afterAll(() => h.close());

  const ids = (bundle: Bundle) => (bundle.entry ?? []).map((e) => `${e.resource?.resourceType}/${e.resource?.id}`);

  test('A reads its appointment; B gets 404 for read, vread and history', async () => {
    expect((await call(h, a, 'GET', `/Appointment/${apptId}`)).status).toBe(200);
    for (const path of [`/Appointment/${apptId}`, `/Appointment/${apptId}/_history/1`, `/Appointment/${apptId}/_history`]) {
      const res = await call(h, b, 'GET', path);
      expect(res.status).toBe(404);
      expect(res.body.resourceType).toBe('OperationOutcome');
    }
  });

  test('B does not find it by search, _revinclude, chain or _has; A does', async () => {
    const searches = [
      `/Appointment?_id=${apptId}`,
      '/Appointment?slot=Slot/Slot-Free-Example',
      '/Appointment?slot.status=busy',
      '/Slot?_id=Slot-Free-Example&_revinclude=Appointment:slot',
      '/Slot?_id=Slot-Free-Example&_has:Appointment:slot:status=booked',
    ];
    for (const path of searches) {
      const forA = await call(h, a, 'GET', path);
      const forB = await call(h, b, 'GET', path);
      expect([path, forA.status, forB.status]).toEqual([path, 200, 200]);
      expect(ids(forA.body)).toContain(path.startsWith('/Slot?_id=Slot-Free-Example&_has') ? 'Slot/Slot-Free-Example' : `Appointment/${apptId}`);
      expect(ids(forB.body)).not.toContain(`Appointment/${apptId}`);
      if (path.includes('_has')) expect(forB.body.total).toBe(0);
    }
  });

  test('_include never pulls another institution\'s resource in (including follows references: Patient.r suffices)', async () => {
    const created = await call(h, a, 'POST', '/Patient', { body: { resourceType: 'Patient', active: true, name: [{ family: 'Privat' }] } });
    expect(created.status).toBe(201);
    const patientId = created.body.id as string;
    // An appointment everybody may see (imported by the repository itself, unowned) that points at A's patient.
    const shared = { ...proposal({ slot: [{ reference: 'Slot/Slot-Free-By-Schedule-Example' }], start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z' }), id: 'shared-appt', status: 'booked' as const };
    shared.participant = [{ actor: { reference: `Patient/${patientId}` }, status: 'accepted' }];
    await importResources(h.fhir, shared);
    const path = '/Appointment?_id=shared-appt&_include=Appointment:patient';
    expect(ids((await call(h, a, 'GET', path)).body)).toEqual(['Appointment/shared-appt', `Patient/${patientId}`]);
    expect(ids((await call(h, b, 'GET', path)).body)).toEqual(['Appointment/shared-appt']);
    expect(ids((await call(h, owner, 'GET', path)).body)).toEqual(['Appointment/shared-appt', `Patient/${patientId}`]);
    expect((await call(h, b, 'GET', `/Patient/${patientId}`)).status).toBe(404);
  });

  test('B cannot patch or overwrite it (404) and A can patch it', async () => {
    const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.comment' }, { name: 'value', valueString: 'von B' }] }] };
    const byB = await call(h, b, 'PATCH', `/Appointment/${apptId}`, { body: patch });
    expect(byB.status).toBe(404);
    const put = await call(h, b, 'PUT', `/Appointment/${apptId}`, { body: { ...proposal(), id: apptId, status: 'cancelled' } });
    expect(put.status).toBe(404);
    const byA = await call(h, a, 'PATCH', `/Appointment/${apptId}`, { body: { ...patch, parameter: [{ ...patch.parameter[0], part: [patch.parameter[0].part[0], patch.parameter[0].part[1], { name: 'value', valueString: 'von A' }] }] } });
    expect(byA.status).toBe(200);
    expect(byA.body.comment).toBe('von A');
  });

  test('B cannot re-book A\'s appointment: by its id 404; by cancelled-appt-id the answer for an id that does not exist', async () => {
    const other = { slot: [{ reference: 'Slot/Slot-Free-By-Schedule-Example' }], start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z' };
    const byId = await call(h, b, 'POST', '/Appointment/$book', { body: { ...proposal(other), id: apptId } });
    expect(byId.status).toBe(404);
    expect(byId.body.resourceType).toBe('OperationOutcome');
    const rebook = (id: string) => call(h, b, 'POST', '/Appointment/$book', { body: parameters({ 'appt-resource': proposal(other), 'cancelled-appt-id': { valueUri: `Appointment/${id}` } }) });
    const foreign = await rebook(apptId);
    const missing = await rebook('does-not-exist');
    expect([foreign.status, foreign.body.issue?.[0]?.code]).toEqual([missing.status, missing.body.issue?.[0]?.code]);
    expect(foreign.body.issue[0].code).toBe('not-found');
    expect((await call(h, a, 'GET', `/Appointment/${apptId}`)).body.status).toBe('booked');
  });

  test('the repository owner sees it in reads and searches', async () => {
    expect((await call(h, owner, 'GET', `/Appointment/${apptId}`)).status).toBe(200);
    const res = await call(h, owner, 'GET', `/Appointment?_id=${apptId}`);
    expect(ids(res.body)).toEqual([`Appointment/${apptId}`]);
  });

  test('the owning institution is the Telematik-ID of the token that created it', async () => {
    const { rows } = await h.ctx.db.query<{ owner: string }>('SELECT owner FROM resource WHERE resource_type = $1 AND id = $2', ['Appointment', apptId]);
    expect(rows[0].owner).toBe('1-PEP-INST-A');
  });
});
