import type { AuditEvent, Bundle } from '@medplum/fhirtypes';
import request from 'supertest';
import { CLIENT_ID_SYSTEM } from '../../src/audit/balp';
import { metricsRegistry } from '../../src/server-lib/metrics';
import { TELEMATIK_ID_SYSTEM } from '../../src/common/vocabulary';
import type { TestToken } from '../guard/helpers/get-token';
import { call, institution, pepHarness, type PepHarness } from '../guard/pep/helpers';
import { clientOf, dataOf, eventsOf, patientOf, queryOf, storedEvents, threePatients, userOf } from './helpers';

const OWNER = '1-AUDIT-OWNER';
const REQUESTOR = '1-AUDIT-REQUESTOR';

/**
 * What is recorded (IHE BALP): every interaction through the enforcing guard, refusals included,
 * and the authorization server's security events; each AuditEvent names the user, the client, the
 * address and the request, and never a credential.
 */
describe('the audit trail records every access', () => {
  let h: PepHarness;
  let owner: TestToken;
  let requestor: TestToken;
  let appointments: string[];
  beforeAll(async () => {
    h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
    owner = await institution(h, { telematikId: OWNER, organizationName: 'Praxis Dr. Audit', professionOid: '1.2.276.0.76.4.50' });
    requestor = await institution(h, { telematikId: REQUESTOR });
    appointments = await threePatients(h);
  });
  afterAll(() => h.close());

  const withId = (id: string) => ({ headers: { 'X-Request-Id': id } });

  test('a read: the user with name and profession, the client with product, the address, the request, the entity and its patient', async () => {
    const res = await call(h, owner, 'GET', '/Appointment/Appointment-Read-Example', withId('audit-read-1'));
    expect(res.status).toBe(200);
    const events = await eventsOf(h, 'audit-read-1');
    expect(events).toHaveLength(1);
    const [e] = events;
    expect(e.meta?.profile).toEqual(['https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientRead']);
    expect(e.type.code).toBe('rest');
    expect(e.subtype?.[0]).toEqual({ system: 'http://hl7.org/fhir/restful-interaction', code: 'read' });
    expect([e.action, e.outcome]).toEqual(['R', '0']);
    expect(userOf(e)?.who?.identifier).toEqual({ system: TELEMATIK_ID_SYSTEM, value: OWNER });
    expect(userOf(e)?.name).toBe('Praxis Dr. Audit');
    expect(userOf(e)?.role?.[0].coding?.[0].code).toBe('1.2.276.0.76.4.50');
    expect(clientOf(e)?.who?.identifier).toEqual({ system: CLIENT_ID_SYSTEM, value: owner.clientId });
    expect(clientOf(e)?.who?.display).toMatch(/\S/);
    expect(clientOf(e)?.network?.address).toMatch(/127\.0\.0\.1|::1|::ffff:127\.0\.0\.1/);
    expect(e.source.observer.display).toContain(h.ctx.config.publicUrl);
    expect(dataOf(e)).toEqual(['Appointment/Appointment-Read-Example/_history/1']);
    expect(patientOf(e)).toBe('Patient/Patient-Read-Example');
    const json = JSON.stringify(e);
    for (const secret of [owner.accessToken, owner.accessToken.split('.')[2], owner.refreshToken]) expect(json).not.toContain(secret);
  });

  test("a search returning three patients' appointments: one AuditEvent per patient, each naming that patient alone", async () => {
    const res = await call(h, owner, 'GET', `/Appointment?_id=${appointments.join(',')}`, withId('audit-search-3'));
    expect(res.status).toBe(200);
    expect((res.body as Bundle).entry).toHaveLength(3);
    const events = await eventsOf(h, 'audit-search-3');
    expect(events.map(patientOf).sort()).toEqual(['Patient/Patient-Read-Example', 'Patient/audit-patient-B', 'Patient/audit-patient-C']);
    for (const e of events) {
      expect(e.meta?.profile?.[0]).toMatch(/IHE\.BasicAudit\.PatientQuery$/);
      expect([e.action, e.subtype?.[0].code]).toEqual(['E', 'search-type']);
      expect(Buffer.from(queryOf(e)!.query!, 'base64').toString()).toBe(`GET /fhir/Appointment?_id=${encodeURIComponent(appointments.join(','))}`);
      expect(e.entity?.filter((x) => x.type?.code === '1')).toHaveLength(1);
    }
  });

  test("a slot search that includes the slot's appointments names their patients", async () => {
    const { rows } = await h.ctx.db.query<{ slot: string }>("SELECT content->'slot'->0->>'reference' AS slot FROM resource WHERE resource_type = 'Appointment' AND id = 'Appointment-Read-Example'");
    const slot = rows[0].slot.replace(/^Slot\//, '');
    const res = await call(h, owner, 'GET', `/Slot?_id=${slot}&_revinclude=Appointment:slot`, withId('audit-slot-revinclude'));
    expect(res.status).toBe(200);
    expect((res.body as Bundle).entry?.filter((e) => e.resource?.resourceType === 'Appointment')).toHaveLength(3);
    const events = await eventsOf(h, 'audit-slot-revinclude');
    expect(events.map(patientOf).sort()).toEqual(['Patient/Patient-Read-Example', 'Patient/audit-patient-B', 'Patient/audit-patient-C']);
  });

  test('a search returning no patient data (slots): one query event without a patient', async () => {
    expect((await call(h, requestor, 'GET', '/Slot?_count=5', withId('audit-slots'))).status).toBe(200);
    const events = await eventsOf(h, 'audit-slots');
    expect(events).toHaveLength(1);
    expect(patientOf(events[0])).toBeUndefined();
    expect(events[0].meta?.profile?.[0]).toMatch(/IHE\.BasicAudit\.Query$/);
    expect(userOf(events[0])?.who?.identifier?.value).toBe(REQUESTOR);
  });

  test('a write stores its AuditEvent in its transaction; a rolled-back transaction leaves none of its writes', async () => {
    const created = await call(h, owner, 'POST', '/Patient', { ...withId('audit-create'), body: { resourceType: 'Patient', active: true } });
    expect(created.status).toBe(201);
    const [e, ...more] = await eventsOf(h, 'audit-create');
    expect(more).toHaveLength(0);
    expect([e.subtype?.[0].code, e.action, e.outcome]).toEqual(['create', 'C', '0']);
    expect(dataOf(e)).toEqual([`Patient/${created.body.id}/_history/1`]);
    expect(patientOf(e)).toBe(`Patient/${created.body.id}`);

    const tx = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { fullUrl: 'urn:uuid:5b1c2c4e-0000-4000-8000-000000000001', resource: { resourceType: 'Patient', active: true, name: [{ family: 'Rolled-Back' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', id: 'broken', gender: 'not-a-gender' }, request: { method: 'PUT', url: 'Patient/broken' } },
      ],
    };
    const failed = await call(h, owner, 'POST', '', { ...withId('audit-rollback'), body: tx });
    expect(failed.status).toBe(422);
    const events = await eventsOf(h, 'audit-rollback');
    expect(events.filter((x) => x.outcome === '0')).toEqual([]);
    expect(events.map((x) => [x.subtype?.[0].code, x.outcome])).toContainEqual(['transaction', '4']);
    const { rows } = await h.ctx.db.query("SELECT 1 FROM resource WHERE content->'name'->0->>'family' = 'Rolled-Back'");
    expect(rows).toHaveLength(0);
  });

  test('refusals at the enforcement point: no token names the address only; a missing scope names the caller; an unknown type too', async () => {
    const anonymous = await request(h.app).get('/fhir/Slot').set('X-Request-Id', 'audit-401');
    expect(anonymous.status).toBe(401);
    const [e401] = await eventsOf(h, 'audit-401');
    expect([e401.outcome, e401.subtype?.[0].code]).toEqual(['4', 'search-type']);
    expect(e401.outcomeDesc).toMatch(/^401 invalid_token/);
    expect(userOf(e401)).toBeUndefined();
    expect(clientOf(e401)?.who).toBeUndefined();
    expect(clientOf(e401)?.network?.address).toBeTruthy();

    const narrow = await institution(h, { telematikId: REQUESTOR, scope: 'system/Slot.rs' });
    expect((await call(h, narrow, 'GET', '/Appointment?status=booked', withId('audit-403'))).status).toBe(403);
    const [e403] = await eventsOf(h, 'audit-403');
    expect(e403.outcomeDesc).toMatch(/^403 insufficient_scope/);
    expect(userOf(e403)?.who?.identifier?.value).toBe(REQUESTOR);
    expect(clientOf(e403)?.who?.identifier?.value).toBe(narrow.clientId);

    expect((await call(h, owner, 'GET', '/Nonsense/1', withId('audit-404'))).status).toBe(404);
    const [e404] = await eventsOf(h, 'audit-404');
    expect(e404.outcomeDesc).toMatch(/^404 /);
    expect(userOf(e404)?.who?.identifier?.value).toBe(OWNER);
  });

  test('security events: a token issued, a refresh token reused (the family revoked), a revocation; never the token', async () => {
    const before = (await storedEvents(h)).length;
    const t = await institution(h, { telematikId: '1-AUDIT-SECURITY' });
    const first = await t.client.refresh();
    expect(first.accessToken).toBeTruthy();
    // The first refresh token once more: a reuse (RFC 9700 §4.14.2).
    t.client.tokens = { ...t.client.tokens!, refreshToken: t.refreshToken };
    await expect(t.client.refresh()).rejects.toThrow(/already used/);
    const events = (await storedEvents(h)).slice(before).filter((e) => e.type.code !== 'rest');
    const codes = events.map((e) => e.subtype?.[0].code);
    expect(codes).toEqual(expect.arrayContaining(['client-registered', 'token-issued', 'refresh-token-reuse']));
    const issued = events.find((e) => e.subtype?.[0].code === 'token-issued')!;
    expect(userOf(issued)?.who?.identifier?.value).toBe('1-AUDIT-SECURITY');
    const reuse = events.find((e) => e.subtype?.[0].code === 'refresh-token-reuse')!;
    expect([reuse.type.code, reuse.outcome]).toEqual(['110113', '4']);
    const json = JSON.stringify(events);
    for (const secret of [t.accessToken, t.refreshToken, first.accessToken]) expect(json).not.toContain(secret);
  });
});

test('metrics: events stored by kind and outcome, the delay an answer waits for its record', async () => {
  const h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
  try {
    const owner = await institution(h, { telematikId: OWNER });
    expect((await call(h, owner, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
    const text = await metricsRegistry.metrics();
    expect(text).toMatch(/terminus_audit_events_total\{kind="rest",outcome="0"\} [1-9]/);
    expect(text).toMatch(/terminus_audit_events_total\{kind="security",outcome="0"\} [1-9]/);
    expect(text).toMatch(/terminus_audit_write_seconds_count [1-9]/);
    expect(text).toContain('terminus_audit_failures_total');
  } finally {
    await h.close();
  }
});

describe('AUDIT_MODE', () => {
  test('sync: an access whose AuditEvent cannot be stored is refused with 503, and /readyz says so', async () => {
    const h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER }, fixture: true, redis: false });
    try {
      const owner = await institution(h, { telematikId: OWNER });
      expect((await call(h, owner, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
      await h.ctx.db.query('ALTER TABLE audit_event RENAME TO audit_event_away');
      const refused = await call(h, owner, 'GET', '/Slot/Slot-Free-Example');
      expect(refused.status).toBe(503);
      expect(refused.body.issue[0].code).toBe('transient');
      expect(refused.headers['retry-after']).toBeDefined();
      const ready = await request(h.app).get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.audit.status).toBe('unavailable');
      await h.ctx.db.query('ALTER TABLE audit_event_away RENAME TO audit_event');
      expect((await call(h, owner, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
      expect((await request(h.app).get('/readyz')).body.checks.audit).toBe('ok');
    } finally {
      await h.close();
    }
  });

  test('buffered: the answer does not wait; the events follow', async () => {
    const h = await pepHarness({ env: { REPOSITORY_OWNERS: OWNER, AUDIT_MODE: 'buffered' }, fixture: true, redis: false });
    try {
      const owner = await institution(h, { telematikId: OWNER });
      await h.ctx.db.query('ALTER TABLE audit_event RENAME TO audit_event_away');
      expect((await call(h, owner, 'GET', '/Slot/Slot-Free-Example')).status).toBe(200);
      await h.ctx.db.query('ALTER TABLE audit_event_away RENAME TO audit_event');
      expect((await call(h, owner, 'GET', '/Slot/Slot-Free-Example', { headers: { 'X-Request-Id': 'buffered-1' } })).status).toBe(200);
      let events: AuditEvent[] = [];
      for (let i = 0; i < 200 && events.length === 0; i++) {
        events = await eventsOf(h, 'buffered-1');
        if (events.length === 0) await new Promise((r) => setTimeout(r, 25));
      }
      expect(events).toHaveLength(1);
    } finally {
      await h.close();
    }
  });
});
