import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../src/app';
import type { AppContext } from '../../src/context';
import { createTestContext } from '../helpers/context';

const ST = 'http://terminology.hl7.org/CodeSystem/service-type';
const IHE = 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen';
const FHIR_JSON = 'application/fhir+json';

const schedule = (id: string, extra: Record<string, unknown> = {}) => ({
  resourceType: 'Schedule',
  id,
  active: true,
  serviceType: [{ coding: [{ system: ST, code: '177' }], text: 'Sprechstunde' }],
  specialty: [{ coding: [{ system: IHE, code: 'NEUR' }] }],
  actor: [{ reference: 'Practitioner/doc1', display: 'Dr. Test' }],
  ...extra,
});
const slot = (id: string, start: string, end: string, status = 'free') => ({
  resourceType: 'Slot',
  id,
  schedule: { reference: 'Schedule/sched1' },
  status,
  start,
  end,
});

describe('FHIR REST interactions', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    await request(app).put('/fhir/Practitioner/doc1').set('Content-Type', FHIR_JSON).send({ resourceType: 'Practitioner', id: 'doc1', name: [{ family: 'Test' }] }).expect(201);
    await request(app).put('/fhir/Schedule/sched1').set('Content-Type', FHIR_JSON).send(schedule('sched1')).expect(201);
  });
  afterAll(() => ctx.db.close());

  test('metadata is a CapabilityStatement of kind instance instantiating the ISiK roles', async () => {
    const res = await request(app).get('/fhir/metadata');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json; charset=UTF-8$/i);
    expect(res.body.kind).toBe('instance');
    expect(res.body.instantiates).toContain('https://gematik.de/fhir/isik/CapabilityStatement/ISiKCapabilityStatementTerminRepositoryAkteur');
    const slotRes = res.body.rest[0].resource.find((r: { type: string }) => r.type === 'Slot');
    const names = slotRes.searchParam.map((p: { name: string }) => p.name);
    expect(names).toEqual(expect.arrayContaining(['_id', '_count', '_lastUpdated', '_tag', 'schedule', 'status', 'start']));
    expect(slotRes.interaction.map((i: { code: string }) => i.code)).toEqual(expect.arrayContaining(['read', 'search-type']));
    const appointment = res.body.rest[0].resource.find((r: { type: string }) => r.type === 'Appointment');
    expect(appointment.interaction.map((i: { code: string }) => i.code)).toContain('patch');
    expect(appointment.operation).toEqual(expect.arrayContaining([{ name: 'book', definition: 'https://gematik.de/fhir/isik/OperationDefinition/AppointmentBook' }]));
    const allOperations = JSON.stringify(res.body.rest[0].operation ?? []) + JSON.stringify(res.body.rest[0].resource.map((r: { operation?: unknown }) => r.operation));
    expect(allOperations).not.toMatch(/async-status|"patch"/);
  });

  test('create assigns an id and version, answers 201 with Location and ETag', async () => {
    const res = await request(app).post('/fhir/Slot').set('Content-Type', FHIR_JSON).send(slot('ignored', '2027-03-01T09:00:00Z', '2027-03-01T09:15:00Z'));
    expect(res.status).toBe(201);
    expect(res.body.id).not.toBe('ignored');
    expect(res.body.meta.versionId).toBe('1');
    expect(res.headers.etag).toBe('W/"1"');
    expect(res.headers.location).toBe(`http://localhost:8080/fhir/Slot/${res.body.id}/_history/1`);
  });

  test('update keeps versions; vread, history and If-Match behave', async () => {
    await request(app).put('/fhir/Slot/v-slot').set('Content-Type', FHIR_JSON).send(slot('v-slot', '2027-03-02T09:00:00Z', '2027-03-02T09:15:00Z')).expect(201);
    const second = await request(app)
      .put('/fhir/Slot/v-slot')
      .set('Content-Type', FHIR_JSON)
      .set('If-Match', 'W/"1"')
      .send({ ...slot('v-slot', '2027-03-02T09:00:00Z', '2027-03-02T09:15:00Z'), comment: 'second' });
    expect(second.status).toBe(200);
    expect(second.body.meta.versionId).toBe('2');
    const stale = await request(app)
      .put('/fhir/Slot/v-slot')
      .set('Content-Type', FHIR_JSON)
      .set('If-Match', 'W/"1"')
      .send(slot('v-slot', '2027-03-02T09:00:00Z', '2027-03-02T09:15:00Z'));
    expect(stale.status).toBe(412);
    expect(stale.body.resourceType).toBe('OperationOutcome');
    expect(stale.body.issue[0].code).toBe('conflict');
    const v1 = await request(app).get('/fhir/Slot/v-slot/_history/1');
    expect(v1.status).toBe(200);
    expect(v1.body.comment).toBeUndefined();
    const history = await request(app).get('/fhir/Slot/v-slot/_history');
    expect(history.body.type).toBe('history');
    expect(history.body.entry.map((e: { response: { etag: string } }) => e.response.etag)).toEqual(['W/"2"', 'W/"1"']);
    expect((await request(app).get('/fhir/Slot/v-slot/_history/9')).status).toBe(404);
  });

  test('delete is soft: read answers 410, the history keeps the versions', async () => {
    await request(app).put('/fhir/Slot/del-slot').set('Content-Type', FHIR_JSON).send(slot('del-slot', '2027-03-03T09:00:00Z', '2027-03-03T09:15:00Z')).expect(201);
    expect((await request(app).delete('/fhir/Slot/del-slot')).status).toBe(200);
    const read = await request(app).get('/fhir/Slot/del-slot');
    expect(read.status).toBe(410);
    expect(read.body.issue[0].code).toBe('deleted');
    expect((await request(app).get('/fhir/Slot/del-slot/_history/1')).status).toBe(200);
    expect((await request(app).get('/fhir/Slot/never-was')).status).toBe(404);
  });

  test('search answers a searchset with total and working next links', async () => {
    for (let i = 0; i < 5; i++) {
      const d = String(10 + i);
      await request(app).put(`/fhir/Slot/page-${i}`).set('Content-Type', FHIR_JSON).send(slot(`page-${i}`, `2027-04-${d}T09:00:00Z`, `2027-04-${d}T09:30:00Z`)).expect(201);
    }
    const first = await request(app).get('/fhir/Slot?schedule=Schedule/sched1&start=ge2027-04-01&start=le2027-04-30&_count=2&_sort=start');
    expect(first.status).toBe(200);
    expect(first.body.type).toBe('searchset');
    expect(first.body.total).toBe(5);
    expect(first.body.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['page-0', 'page-1']);
    const next = first.body.link.find((l: { relation: string }) => l.relation === 'next').url as string;
    const second = await request(app).get(next.replace('http://localhost:8080', ''));
    expect(second.body.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['page-2', 'page-3']);
    const counted = await request(app).get('/fhir/Slot/?_count');
    expect(counted.body.total).toBeGreaterThan(0);
    expect(counted.body.entry.length).toBeGreaterThan(0);
  });

  test('POST _search takes form parameters', async () => {
    const res = await request(app).post('/fhir/Slot/_search').type('form').send('_id=page-1');
    expect(res.status).toBe(200);
    expect(res.body.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['page-1']);
  });

  test('Slot?status without schedule is 422; schedule without start means from now on', async () => {
    const res = await request(app).get('/fhir/Slot?status=free');
    expect(res.status).toBe(422);
    expect(res.body.issue[0].code).toBe('too-costly');
    await request(app).put('/fhir/Slot/past').set('Content-Type', FHIR_JSON).send(slot('past', '2020-01-01T09:00:00Z', '2020-01-01T09:15:00Z')).expect(201);
    const fromNow = await request(app).get('/fhir/Slot?schedule=sched1&_count=500');
    const ids = fromNow.body.entry.map((e: { resource: { id: string } }) => e.resource.id);
    expect(ids).toContain('page-0');
    expect(ids).not.toContain('past');
  });

  test('unknown parameters: a warning in lenient mode, 400 under Prefer: handling=strict', async () => {
    const lenient = await request(app).get('/fhir/Schedule?colour=blue');
    expect(lenient.status).toBe(200);
    const warning = lenient.body.entry.find((e: { search: { mode: string } }) => e.search.mode === 'outcome');
    expect(warning.resource.issue[0].severity).toBe('warning');
    const strict = await request(app).get('/fhir/Schedule?colour=blue').set('Prefer', 'handling=strict');
    expect(strict.status).toBe(400);
    expect(strict.body.issue[0].code).toBe('not-supported');
  });

  test('XML in and out, with charset', async () => {
    const read = await request(app).get('/fhir/Schedule/sched1').set('Accept', 'application/fhir+xml');
    expect(read.status).toBe(200);
    expect(read.headers['content-type']).toBe('application/fhir+xml; charset=UTF-8');
    expect(read.text).toContain('<Schedule xmlns="http://hl7.org/fhir">');
    const viaFormat = await request(app).get('/fhir/Schedule?_id=sched1&_format=xml');
    expect(viaFormat.headers['content-type']).toMatch(/application\/fhir\+xml/);
    expect(viaFormat.text).toContain('<Bundle xmlns="http://hl7.org/fhir">');
    const xmlBody = read.text.replace('sched1', 'sched-xml');
    const created = await request(app).put('/fhir/Schedule/sched-xml').set('Content-Type', 'application/fhir+xml').send(xmlBody);
    expect(created.status).toBe(201);
    const back = await request(app).get('/fhir/Schedule/sched-xml');
    expect(back.body.serviceType).toEqual(schedule('x').serviceType);
  });

  test.each([
    ['malformed JSON', 'application/fhir+json', '{"resourceType":', 400, 'structure'],
    ['malformed XML', 'application/fhir+xml', '<Schedule xmlns="http://hl7.org/fhir"><active value="true"/>', 400, 'structure'],
    ['an unsupported media type', 'text/plain', 'hello', 415, 'not-supported'],
  ])('%s is refused with a coded OperationOutcome', async (_name, contentType, body, status, code) => {
    const res = await request(app).put('/fhir/Schedule/bad').set('Content-Type', contentType).send(body);
    expect(res.status).toBe(status);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].code).toBe(code);
  });

  test('an Accept the server cannot serve answers 406', async () => {
    const res = await request(app).get('/fhir/Schedule/sched1').set('Accept', 'text/html');
    expect(res.status).toBe(406);
  });

  test('a body of another type or id than the URL is 400', async () => {
    const wrongType = await request(app).put('/fhir/Schedule/x1').set('Content-Type', FHIR_JSON).send({ resourceType: 'Slot', id: 'x1' });
    expect(wrongType.status).toBe(400);
    const wrongId = await request(app).put('/fhir/Schedule/x1').set('Content-Type', FHIR_JSON).send(schedule('x2'));
    expect(wrongId.status).toBe(400);
  });

  test('an ISiK rule violation is 422 with the element in expression, and nothing is stored', async () => {
    const { active: _a, ...withoutActive } = schedule('inactive-less');
    const res = await request(app).put('/fhir/Schedule/inactive-less').set('Content-Type', FHIR_JSON).send(withoutActive);
    expect(res.status).toBe(422);
    expect(res.body.issue.some((i: { expression?: string[] }) => i.expression?.some((e) => e.includes('active')))).toBe(true);
    expect((await request(app).get('/fhir/Schedule/inactive-less')).status).toBe(404);
  });

  test('a transaction is all or nothing and resolves urn:uuid references', async () => {
    const good = await request(app)
      .post('/fhir')
      .set('Content-Type', FHIR_JSON)
      .send({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { fullUrl: 'urn:uuid:8c2a4c1e-0a51-4d1c-9a7e-3b0f7c1e0a01', resource: schedule('tx-ignored'), request: { method: 'POST', url: 'Schedule' } },
          {
            resource: { ...slot('tx-slot', '2027-05-01T09:00:00Z', '2027-05-01T09:15:00Z'), schedule: { reference: 'urn:uuid:8c2a4c1e-0a51-4d1c-9a7e-3b0f7c1e0a01' } },
            request: { method: 'PUT', url: 'Slot/tx-slot' },
          },
        ],
      });
    expect(good.status).toBe(200);
    expect(good.body.type).toBe('transaction-response');
    expect(good.body.entry[0].response.status).toBe('201 Created');
    const txSlot = await request(app).get('/fhir/Slot/tx-slot');
    expect(txSlot.body.schedule.reference).toMatch(/^Schedule\/[0-9a-f-]{36}$/);

    const bad = await request(app)
      .post('/fhir')
      .set('Content-Type', FHIR_JSON)
      .send({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { resource: slot('tx-ok', '2027-05-02T09:00:00Z', '2027-05-02T09:15:00Z'), request: { method: 'PUT', url: 'Slot/tx-ok' } },
          { resource: { resourceType: 'Slot', id: 'tx-bad', status: 'free' }, request: { method: 'PUT', url: 'Slot/tx-bad' } },
        ],
      });
    expect(bad.status).toBe(422);
    expect(bad.body.issue[0].diagnostics).toMatch(/^Bundle\.entry\[1\]/);
    expect((await request(app).get('/fhir/Slot/tx-ok')).status).toBe(404);
  });

  test('a batch processes entries independently', async () => {
    const res = await request(app)
      .post('/fhir')
      .set('Content-Type', FHIR_JSON)
      .send({
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { resource: slot('b-ok', '2027-05-03T09:00:00Z', '2027-05-03T09:15:00Z'), request: { method: 'PUT', url: 'Slot/b-ok' } },
          { request: { method: 'GET', url: 'Slot/nope' } },
        ],
      });
    expect(res.status).toBe(200);
    expect(res.body.type).toBe('batch-response');
    expect(res.body.entry[0].response.status).toBe('201 Created');
    expect(res.body.entry[1].response.status).toBe('404 Not Found');
  });

  test('a batch refuses an entry that is itself a batch or transaction (400, nothing inside runs), as a transaction does', async () => {
    await request(app).put('/fhir/Slot/nest-1').set('Content-Type', FHIR_JSON).send(slot('nest-1', '2027-05-04T09:00:00Z', '2027-05-04T09:15:00Z')).expect(201);
    const inner = (type: string) => ({ resourceType: 'Bundle', type, entry: [{ request: { method: 'DELETE', url: 'Slot/nest-1' } }] });
    let nested: Record<string, unknown> = inner('batch');
    for (let depth = 0; depth < 4; depth++) nested = { resourceType: 'Bundle', type: 'batch', entry: [{ resource: nested, request: { method: 'POST', url: '/' } }] };
    const res = await request(app)
      .post('/fhir')
      .set('Content-Type', FHIR_JSON)
      .send({
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { resource: nested, request: { method: 'POST', url: '/' } },
          { resource: inner('transaction'), request: { method: 'POST', url: '/' } },
          { request: { method: 'GET', url: 'Slot/nest-1' } },
        ],
      });
    expect(res.status).toBe(200);
    expect(res.body.entry.map((e: { response: { status: string } }) => e.response.status)).toEqual(['400 Bad Request', '400 Bad Request', '200 OK']);
    expect(res.body.entry[0].response.outcome.issue[0].diagnostics).toBe('Bundle.entry[0]: Bundles cannot be nested');
    expect(res.body.entry[1].response.outcome.issue[0].diagnostics).toBe('Bundle.entry[1]: Bundles cannot be nested');
    expect((await request(app).get('/fhir/Slot/nest-1')).status).toBe(200);
  });

  test.each([
    ['GET', '/fhir/Unknown/1', 404],
    ['GET', '/fhir/Slot/bad%20id', 400],
    ['DELETE', '/fhir/Slot', 405],
    ['PUT', '/fhir/metadata', 405],
  ])('%s %s answers %i', async (method, path, status) => {
    const res = await request(app)[method.toLowerCase() as 'get'](path);
    expect(res.status).toBe(status);
    expect(res.body.resourceType).toBe('OperationOutcome');
  });
});
