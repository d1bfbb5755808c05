import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../src/app';
import type { AppContext } from '../../src/context';
import { createTestContext } from '../helpers/context';

const FORM = 'application/x-www-form-urlencoded';

/**
 * POST [type]/_search (FHIR R4 §3.1.1.3): the form's parameters count as the query's and are held
 * to the same rules. Found by the fuzzer (test/fuzz): a NUL in a form value reached PostgreSQL
 * (500 "invalid byte sequence for encoding UTF8: 0x00"), and a nameless form parameter (or a
 * query name of blanks) became a warning with an empty expression, which XML cannot carry (500).
 */
describe('form search and nameless parameters', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
  });
  afterAll(() => ctx.db.close());

  test.each([
    ['a NUL in a value', 'name=a%00b', "Form parameter 'name' contains a NUL character"],
    ['a NUL in a token value', 'identifier=a%00b', "Form parameter 'identifier' contains a NUL character"],
    ['a NUL in a name', 'na%00me=ab', "Form parameter 'na\\0me' contains a NUL character"],
    ['a parameter without a name', '=x', 'A form parameter has no name'],
  ])('%s: 400 with an OperationOutcome naming the body', async (_name, form, diagnostics) => {
    const res = await request(app).post('/fhir/Patient/_search').set('Content-Type', FORM).send(form);
    expect(res.status).toBe(400);
    expect(res.body.issue).toEqual([expect.objectContaining({ severity: 'error', code: 'structure', diagnostics, expression: ['$this'] })]);
  });

  test('fuzz case 1:7775, answered in XML: 400 with an OperationOutcome', async () => {
    const res = await request(app).post('/fhir/Schedule/_search').set('Content-Type', FORM).set('Accept', 'application/xml').send('=&&&&%ZZ=1&a=%E0%A4%A');
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+xml/);
    expect(res.text).toContain('<diagnostics value="A form parameter has no name"/>');
  });

  test('a query parameter whose name is a blank is ignored with a warning that names no expression, in JSON and XML', async () => {
    const json = await request(app).get('/fhir/Patient?%20=x');
    expect(json.status).toBe(200);
    const [warning] = json.body.entry.map((e: { resource: unknown }) => e.resource);
    expect(warning).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ severity: 'warning', code: 'not-supported' }] });
    expect(warning.issue[0].expression).toBeUndefined();
    const xml = await request(app).get('/fhir/Patient?%20=x&_format=xml');
    expect(xml.status).toBe(200);
    expect(xml.text).toMatch(/^<\?xml[^>]*\?><Bundle xmlns="http:\/\/hl7.org\/fhir">/);
    expect(xml.text).toContain('<severity value="warning"/>');
  });

  test('a valid form search still answers its matches', async () => {
    await request(app).put('/fhir/Patient/form-1').set('Content-Type', 'application/fhir+json').send({ resourceType: 'Patient', id: 'form-1', name: [{ family: 'Formsuche' }] }).expect(201);
    const res = await request(app).post('/fhir/Patient/_search').set('Content-Type', FORM).send('family=Formsuche');
    expect(res.status).toBe(200);
    expect(res.body.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['form-1']);
  });
});
