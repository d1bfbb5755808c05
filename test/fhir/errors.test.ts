import request from 'supertest';
import type { Express } from 'express';
import type { AppContext } from '../../src/context';
import { createApp } from '../../src/app';
import { createTestContext } from '../helpers/context';

/**
 * Body-level 400s: a body that cannot be read as a resource at all gets one `error`/`structure`
 * issue whose expression is `$this` (the whole resource), in both wire formats.
 */
describe('body-level request errors', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
  });
  afterAll(() => ctx.db.close());

  const post = (contentType: string, body: string) =>
    request(app).post('/fhir/Appointment').set('Content-Type', contentType).set('Accept', 'application/fhir+json').send(body);

  test.each([
    ['malformed JSON', 'application/fhir+json', '{"resourceType": "Appointment",'],
    ['a JSON array', 'application/fhir+json', '[{"resourceType": "Appointment"}]'],
    ['a JSON string', 'application/fhir+json', '"Appointment"'],
    ['JSON without resourceType', 'application/fhir+json', '{"status": "proposed"}'],
    ['malformed XML', 'application/fhir+xml', '<Appointment xmlns="http://hl7.org/fhir"><status value="proposed"/>'],
    ['XML with a DOCTYPE', 'application/fhir+xml', '<!DOCTYPE x><Appointment xmlns="http://hl7.org/fhir"/>'],
  ])('%s is 400 structure at $this', async (_name, contentType, body) => {
    const res = await post(contentType, body);
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue).toHaveLength(1);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'structure', expression: ['$this'] });
  });

  test('an unknown XML element keeps its own path as expression', async () => {
    const res = await post('application/fhir+xml', '<Appointment xmlns="http://hl7.org/fhir"><colour value="red"/></Appointment>');
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'structure', expression: ['Appointment.colour'] });
  });

  test('XML elements out of definition order are 400 structure at the late element', async () => {
    const res = await request(app)
      .post('/fhir/Slot')
      .set('Content-Type', 'application/fhir+xml')
      .set('Accept', 'application/fhir+json')
      .send('<Slot xmlns="http://hl7.org/fhir"><status value="free"/><schedule><reference value="Schedule/s1"/></schedule></Slot>');
    expect(res.status).toBe(400);
    expect(res.body.issue).toHaveLength(1);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'structure', expression: ['Slot.schedule'] });
  });

  test('a JSON Patch body that is not JSON is 400 structure at $this', async () => {
    const res = await request(app)
      .patch('/fhir/Appointment/a1')
      .set('Content-Type', 'application/json-patch+json')
      .set('Accept', 'application/fhir+json')
      .send('[{"op": "replace"');
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'structure', expression: ['$this'] });
  });

  test('a body in an unsupported media type is 415 not-supported without expression', async () => {
    const res = await post('text/plain', 'hello');
    expect(res.status).toBe(415);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'not-supported' });
    expect(res.body.issue[0].expression).toBeUndefined();
  });
});
