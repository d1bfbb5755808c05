import request from 'supertest';
import type { Express } from 'express';
import type { Bundle, CapabilityStatement, Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { createApp } from '../../src/app';
import { createTestContext } from '../helpers/context';

const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };
const TAG = { system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' };

/** Result parameters of R4 search (search.html 3.1.1.5): `_elements`, `_summary`, `_total`. */
describe('search result parameters', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    const patient = {
      resourceType: 'Patient',
      id: 'p1',
      meta: { tag: [TAG] },
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Test Patient</div>' },
      active: true,
      name: [{ family: 'Test', given: ['Patient'] }],
      gender: 'female',
      birthDate: '1970-01-01',
      multipleBirthBoolean: false,
      contact: [{ name: { family: 'Kontakt' } }],
    };
    const res = await request(app).put('/fhir/Patient/p1').set('Content-Type', 'application/fhir+json').send(patient);
    expect(res.status).toBe(201);
  });
  afterAll(() => ctx.db.close());

  const search = async (query: string, prefer?: string) => {
    const req = request(app).get(`/fhir/Patient?${query}`).set('Accept', 'application/fhir+json');
    if (prefer) req.set('Prefer', prefer);
    return req;
  };
  const match = (b: Bundle) => b.entry?.find((e) => e.search?.mode === 'match')?.resource as Record<string, unknown> & Resource;
  const keys = (r: Record<string, unknown>) => Object.keys(r).sort();

  test('_elements keeps the listed top-level elements, id, meta (tagged SUBSETTED) and resourceType', async () => {
    const res = await search('_id=p1&_elements=name,gender');
    expect(res.status).toBe(200);
    const p = match(res.body as Bundle);
    expect(keys(p)).toEqual(['gender', 'id', 'meta', 'name', 'resourceType']);
    expect(p.meta?.tag).toEqual([TAG, SUBSETTED]);
  });

  test('_elements of a choice element keeps its typed key', async () => {
    const p = match((await search('_id=p1&_elements=multipleBirth')).body as Bundle);
    expect(keys(p)).toEqual(['id', 'meta', 'multipleBirthBoolean', 'resourceType']);
  });

  test('_summary=true keeps the elements R4 marks isSummary (not text, not contact)', async () => {
    const p = match((await search('_id=p1&_summary=true')).body as Bundle);
    expect(keys(p)).toEqual(['active', 'birthDate', 'gender', 'id', 'meta', 'name', 'resourceType']);
    expect(p.meta?.tag).toContainEqual(SUBSETTED);
  });

  test('_summary=text keeps text, id, meta and mandatory elements', async () => {
    const p = match((await search('_id=p1&_summary=text')).body as Bundle);
    expect(keys(p)).toEqual(['id', 'meta', 'resourceType', 'text']);
  });

  test('_summary=data drops text only', async () => {
    const p = match((await search('_id=p1&_summary=data')).body as Bundle);
    expect(keys(p)).toEqual(['active', 'birthDate', 'contact', 'gender', 'id', 'meta', 'multipleBirthBoolean', 'name', 'resourceType']);
    expect(p.meta?.tag).toContainEqual(SUBSETTED);
  });

  test('_summary=false returns the resource whole, without SUBSETTED', async () => {
    const p = match((await search('_id=p1&_summary=false')).body as Bundle);
    expect(p.text).toBeDefined();
    expect(p.meta?.tag).toEqual([TAG]);
  });

  test('_summary=count returns the total only', async () => {
    const b = (await search('_summary=count')).body as Bundle;
    expect(b.total).toBe(1);
    expect(b.entry ?? []).toEqual([]);
  });

  test.each(['none', 'estimate', 'accurate'])('_total=%s is accepted, even under handling=strict, and the total is accurate', async (value) => {
    const res = await search(`_id=p1&_total=${value}`, 'handling=strict');
    expect(res.status).toBe(200);
    expect((res.body as Bundle).total).toBe(1);
    expect((res.body as Bundle).entry?.some((e) => e.search?.mode === 'outcome')).toBe(false);
  });

  test.each([
    ['_summary', 'maybe'],
    ['_total', 'exact'],
    ['_elements', 'name.family'],
  ])('%s=%s is 400 invalid', async (name, value) => {
    const res = await search(`${name}=${value}`);
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'invalid', expression: [name] });
  });

  test('token$quantity composites (context-type-quantity) are neither advertised nor accepted', async () => {
    const cs = (await request(app).get('/fhir/metadata').set('Accept', 'application/fhir+json')).body as CapabilityStatement;
    for (const type of ['CodeSystem', 'ValueSet']) {
      const params = cs.rest?.[0].resource?.find((r) => r.type === type)?.searchParam?.map((p) => p.name) ?? [];
      expect(params).toContain('context-type-value');
      expect(params).not.toContain('context-type-quantity');
    }
    const res = await request(app)
      .get('/fhir/ValueSet?context-type-quantity=focus$5')
      .set('Accept', 'application/fhir+json')
      .set('Prefer', 'handling=strict');
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'not-supported', expression: ['context-type-quantity'] });
  });

  test('read and vread take _elements and _summary too; _summary=count is for searches only', async () => {
    for (const path of ['/fhir/Patient/p1', '/fhir/Patient/p1/_history/1']) {
      const cut = await request(app).get(`${path}?_elements=gender`).set('Accept', 'application/fhir+json');
      expect([path, cut.status, keys(cut.body)]).toEqual([path, 200, ['gender', 'id', 'meta', 'resourceType']]);
      expect(cut.body.meta.tag).toEqual([TAG, SUBSETTED]);
      const whole = await request(app).get(path).set('Accept', 'application/fhir+json');
      expect(whole.body.meta.tag).toEqual([TAG]);
      expect(whole.body.contact).toBeDefined();
    }
    const summary = await request(app).get('/fhir/Patient/p1?_summary=true').set('Accept', 'application/fhir+json');
    expect(summary.body.contact).toBeUndefined();
    expect(summary.body.name).toEqual([{ family: 'Test', given: ['Patient'] }]);
    const count = await request(app).get('/fhir/Patient/p1?_summary=count').set('Accept', 'application/fhir+json');
    expect([count.status, count.body.issue?.[0]?.code, count.body.issue?.[0]?.expression]).toEqual([400, 'invalid', ['_summary']]);
  });
});
