import request from 'supertest';
import type { Express } from 'express';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { createApp } from '../../src/app';
import { jsonText, storedEntry } from '../../src/fhir/stored-json';
import { createTestContext } from '../helpers/context';

/** A search answer copies each match's stored JSON text instead of parsing and writing it again. */
describe('stored entries', () => {
  const stored = '{"id": "s1", "status": "free", "resourceType": "Slot"}';

  test('jsonText copies the stored text without asking for the resource, and reads as JSON.stringify would', () => {
    let parses = 0;
    const resource = () => {
      parses++;
      return JSON.parse(stored) as Resource;
    };
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total: 1,
      link: [{ relation: 'self', url: 'http://x/fhir/Slot?status=free' }],
      entry: [
        storedEntry('http://x/fhir/Slot/s1', stored, resource, { mode: 'match' }),
        { fullUrl: 'http://x/fhir/Schedule/a', resource: { resourceType: 'Schedule', id: 'a', actor: [] }, search: { mode: 'include' } },
        { resource: { resourceType: 'OperationOutcome', issue: [] }, search: { mode: 'outcome' } },
      ],
    };
    const text = jsonText(bundle);
    expect(parses).toBe(0);
    expect(text).toContain(`"resource":${stored}`);
    expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(bundle)));
    expect(parses).toBe(1); // JSON.stringify asked the entry for its resource
  });

  test('the entry gives its resource to everyone else, and cannot be given another', () => {
    const entry = storedEntry('http://x/fhir/Slot/s1', stored, () => JSON.parse(stored) as Resource, { mode: 'match' });
    expect(entry.resource).toEqual({ resourceType: 'Slot', id: 's1', status: 'free' });
    expect(Object.keys(entry)).toEqual(['fullUrl', 'resource', 'search']);
    expect(() => {
      (entry as { resource: unknown }).resource = { resourceType: 'Slot' };
    }).toThrow(TypeError);
  });

  test('bodies without stored entries are JSON.stringify', () => {
    const plain: Bundle = { resourceType: 'Bundle', type: 'searchset', entry: [{ resource: { resourceType: 'Slot', id: 'x' } as Resource }] };
    expect(jsonText(plain)).toBe(JSON.stringify(plain));
    const patient = { resourceType: 'Patient', id: 'p' } as Resource;
    expect(jsonText(patient)).toBe(JSON.stringify(patient));
  });
});

describe('search answers from stored text', () => {
  let ctx: AppContext;
  let app: Express;
  const patient = { resourceType: 'Patient', id: 'stored-1', active: true, name: [{ family: 'Grüber "Q"', given: ['Ünal'] }], gender: 'female', birthDate: '1970-01-01' };

  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    const res = await request(app).put('/fhir/Patient/stored-1').set('Content-Type', 'application/fhir+json').send(patient);
    expect(res.status).toBe(201);
  });
  afterAll(() => ctx.db.close());

  test('every format of a search answer holds the resource a read returns', async () => {
    const read = (await request(app).get('/fhir/Patient/stored-1').set('Accept', 'application/fhir+json')).body as Resource;
    expect(read).toMatchObject(patient);
    const json = await request(app).get('/fhir/Patient?_id=stored-1').set('Accept', 'application/fhir+json');
    expect(json.status).toBe(200);
    // The match is the store's own writing of the resource (PostgreSQL's jsonb text), not parsed and written again.
    expect(json.text).toContain('"family": "Grüber \\"Q\\""');
    const bundle = JSON.parse(json.text) as Bundle;
    expect(bundle.entry).toEqual([{ fullUrl: expect.stringMatching(/\/fhir\/Patient\/stored-1$/), resource: read, search: { mode: 'match' } }]);
    const pretty = await request(app).get('/fhir/Patient?_id=stored-1&_pretty=true').set('Accept', 'application/fhir+json');
    expect(pretty.text).toContain('\n  ');
    expect((JSON.parse(pretty.text) as Bundle).entry?.[0].resource).toEqual(read);
    const xml = await request(app).get('/fhir/Patient?_id=stored-1').set('Accept', 'application/fhir+xml');
    expect(xml.status).toBe(200);
    expect(xml.text).toContain('<family value="Grüber &quot;Q&quot;"/>');
    const cut = await request(app).get('/fhir/Patient?_id=stored-1&_elements=gender').set('Accept', 'application/fhir+json');
    const subset = (JSON.parse(cut.text) as Bundle).entry?.[0].resource as unknown as Record<string, unknown>;
    expect(subset.gender).toBe('female');
    expect(subset.name).toBeUndefined();
  });

  test('an entity tag follows the stored text: the same answer twice, a new one after a write', async () => {
    const first = await request(app).get('/fhir/Patient?_id=stored-1').set('Accept', 'application/fhir+json');
    const again = await request(app).get('/fhir/Patient?_id=stored-1').set('Accept', 'application/fhir+json').set('If-None-Match', first.headers.etag);
    expect(again.status).toBe(304);
    await request(app).put('/fhir/Patient/stored-1').set('Content-Type', 'application/fhir+json').send({ ...patient, gender: 'male' }).expect(200);
    const after = await request(app).get('/fhir/Patient?_id=stored-1').set('Accept', 'application/fhir+json').set('If-None-Match', first.headers.etag);
    expect(after.status).toBe(200);
    expect((JSON.parse(after.text) as Bundle).entry?.[0].resource).toMatchObject({ gender: 'male' });
  });
});
