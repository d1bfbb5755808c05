import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../src/app';
import type { AppContext } from '../../src/context';
import { answerClientErrors } from '../../src/server';
import { createTestContext } from '../helpers/context';

const FHIR_JSON = 'application/fhir+json';

/** Name, request, exact status, exact issue code, expression when it is known. */
type Row = [string, () => request.Test, number, string, string?];

/**
 * Hostile and malformed input (docs/requirements.md#robustness-aims): each gets its exact status
 * and issue code in an OperationOutcome, never a 500, and nothing stored changes.
 */
describe('hostile input', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    await request(app).put('/fhir/Patient/p1').set('Content-Type', FHIR_JSON).send({ resourceType: 'Patient', id: 'p1', active: true }).expect(201);
  });
  afterAll(() => ctx.db.close());

  /** Every stored version, in order: a refused request must leave it exactly as it was. */
  const stored = async () =>
    (await ctx.db.query<{ k: string }>("SELECT resource_type || '/' || id || '/' || version_id AS k FROM resource UNION ALL SELECT resource_type || '/' || id || '/' || version_id FROM resource_version ORDER BY 1")).rows.map((r) => r.k);

  const nested = (depth: number) => `{"resourceType":"Patient","extension":[${'{"url":"http://x.test","extension":['.repeat(depth)}${']}'.repeat(depth)}]}`;
  const post = (path: string, body: string | Buffer, contentType = FHIR_JSON) => () => request(app).post(path).set('Content-Type', contentType).send(body);
  const get = (path: string) => () => request(app).get(path);
  const bundle = (entry: unknown) => JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry });
  const bookParameters = (parameter: unknown) => JSON.stringify({ resourceType: 'Parameters', parameter });
  const fhirPathPatch = (parameter: unknown) => () =>
    request(app).patch('/fhir/Patient/p1').set('Content-Type', FHIR_JSON).send({ resourceType: 'Parameters', parameter });
  const replace = (path: string, value: Record<string, unknown>) => ({
    name: 'operation',
    part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: path }, { name: 'value', ...value }],
  });

  const rows: Row[] = [
    ['JSON nested 3,000 deep', post('/fhir/Patient', nested(3000)), 400, 'structure'],
    ['JSON nested 101 objects deep', post('/fhir/Patient', nested(100)), 400, 'structure'],
    ['arrays nested 100,000 deep', post('/fhir/Patient', `{"resourceType":"Patient","extension":${'['.repeat(100000)}${']'.repeat(100000)}}`), 400, 'structure'],
    ['malformed percent-encoding in the id', get('/fhir/Patient/%E0%A4%A'), 400, 'invalid'],
    ['a non-hex percent escape', get('/fhir/Patient/a%ZZ'), 400, 'invalid'],
    ['malformed percent-encoding in the type', get('/fhir/%E0%A4%A/x'), 400, 'invalid'],
    ['Bundle.entry [null]', post('/fhir', bundle([null])), 400, 'structure', 'Bundle.entry[0]'],
    ['Bundle.entry an object', post('/fhir', bundle({})), 400, 'structure', 'Bundle.entry'],
    ['Bundle.entry a string', post('/fhir', bundle('abc')), 400, 'structure', 'Bundle.entry'],
    ['Bundle.entry.request a string', post('/fhir', bundle([{ request: 'GET' }])), 400, 'structure', 'Bundle.entry[0].request'],
    ['Bundle.entry.request.method a number', post('/fhir', bundle([{ request: { method: 5, url: 'Patient' } }])), 400, 'structure', 'Bundle.entry[0].request'],
    ['Bundle.entry.request.method not an HTTP verb', post('/fhir', bundle([{ request: { method: 'FOO', url: 'Patient' } }])), 400, 'code-invalid', 'Bundle.entry[0].request.method'],
    ['$book parameter [null]', post('/fhir/Appointment/$book', bookParameters([null])), 400, 'structure', 'Parameters.parameter[0]'],
    ['$book parameter an object', post('/fhir/Appointment/$book', bookParameters({})), 400, 'structure', 'Parameters.parameter'],
    ['vread of a version beyond integer range', get('/fhir/Patient/p1/_history/2147483648'), 404, 'not-found'],
    ['_offset beyond 64 bits', get('/fhir/Patient?_offset=9223372036854775808'), 400, 'invalid', '_offset'],
    ['_offset beyond integer range', get('/fhir/Patient?_offset=2147483648'), 400, 'invalid', '_offset'],
    ['a __proto__ key', post('/fhir/Patient', '{"resourceType":"Patient","__proto__":{"x":1}}'), 400, 'structure', 'Patient.__proto__'],
    ['a constructor key', post('/fhir/Patient', '{"resourceType":"Patient","constructor":{"prototype":{"x":1}}}'), 400, 'structure', 'Patient.constructor'],
    ['a nested hasOwnProperty key', post('/fhir/Patient', '{"resourceType":"Patient","name":[{"hasOwnProperty":"x"}]}'), 400, 'structure', 'Patient.name[0].hasOwnProperty'],
    ['a toString key', post('/fhir/Patient', '{"resourceType":"Patient","toString":"x"}'), 400, 'structure', 'Patient.toString'],
    [
      'a constructor element in XML',
      post('/fhir/Patient', '<Patient xmlns="http://hl7.org/fhir"><constructor value="x"/></Patient>', 'application/fhir+xml'),
      400,
      'structure',
    ],
    ['a duplicate key', post('/fhir/Patient', '{"resourceType":"Patient","active":true,"active":false}'), 400, 'structure', 'Patient.active'],
    ['a duplicate key spelled with an escape', post('/fhir/Patient', '{"resourceType":"Patient","active":true,"\\u0061ctive":false}'), 400, 'structure', 'Patient.active'],
    ['a duplicate nested key', post('/fhir/Patient', '{"resourceType":"Patient","name":[{"family":"a"},{"family":"b","family":"c"}]}'), 400, 'structure', 'Patient.name[1].family'],
    ['a duplicate resourceType', post('/fhir/Patient', '{"resourceType":"Patient","resourceType":"Appointment"}'), 400, 'structure'],
    [
      'invalid UTF-8 bytes',
      post('/fhir/Patient', Buffer.concat([Buffer.from('{"resourceType":"Patient","name":[{"family":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')])),
      400,
      'structure',
    ],
    ['a charset other than UTF-8', post('/fhir/Patient', Buffer.from('{"resourceType":"Patient","name":[{"family":"M\xfcller"}]}', 'latin1'), `${FHIR_JSON}; charset=latin1`), 415, 'not-supported'],
    ['If-None-Exist (conditional create is not offered)', () => request(app).post('/fhir/Patient').set('Content-Type', FHIR_JSON).set('If-None-Exist', 'identifier=a|b').send({ resourceType: 'Patient' }), 400, 'not-supported'],
    ['a date that is not in the calendar', get('/fhir/Appointment?date=2025-02-30'), 400, 'invalid'],
    ['a 29 February outside a leap year', get('/fhir/Appointment?date=2025-02-29'), 400, 'invalid'],
    ['an hour 24', get('/fhir/Appointment?date=2025-02-01T24:00:00Z'), 400, 'invalid'],
    ['_sort on an unknown parameter', get('/fhir/Appointment?_sort=foo'), 400, 'not-supported', '_sort=foo'],
    ['_include of an unknown type', get('/fhir/Appointment?_include=Foo:bar'), 400, 'not-supported', '_include=Foo:bar'],
    ['a FHIRPath Patch replace of Patient.constructor', fhirPathPatch([replace('Patient.constructor', { valueString: 'x' })]), 422, 'processing'],
    ['a FHIRPath Patch replace of Patient.toString', fhirPathPatch([replace('Patient.toString', { valueString: 'x' })]), 422, 'processing'],
    [
      'a FHIRPath Patch adding a constructor element',
      fhirPathPatch([{ name: 'operation', part: [{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'constructor' }, { name: 'value', valueString: 'x' }] }]),
      422,
      'processing',
    ],
    ['a FHIRPath Patch with parameter [null]', fhirPathPatch([null]), 400, 'structure', 'Parameters.parameter[0]'],
    ['a FHIRPath Patch with parameter an object', fhirPathPatch({}), 400, 'structure', 'Parameters.parameter'],
    // Findings of fuzz runs, replayed.
    ['a NUL in a search value', get('/fhir/Slot?_id=%00'), 400, 'invalid'],
    ['a NUL inside a search value', get('/fhir/Patient?family=a%00b'), 400, 'invalid'],
    ['a query parameter without a name, XML asked for', get('/fhir/Slot?=&_format=xml'), 400, 'invalid'],
    ['a primitive extension that is a string', post('/fhir/Patient', '{"resourceType":"Patient","_gender":"x"}'), 400, 'structure', 'Patient._gender'],
    ['a repeating primitive extension that is a string', post('/fhir/Patient', '{"resourceType":"Patient","name":[{"given":["a"],"_given":"x"}]}'), 400, 'structure', 'Patient.name[0]._given'],
    ['identifiers that are numbers', post('/fhir/Patient', '{"resourceType":"Patient","identifier":[1,2,3]}'), 400, 'structure', 'Patient.identifier[0]'],
    ['a Reference that is a string', post('/fhir/Patient', '{"resourceType":"Patient","generalPractitioner":["Practitioner/1"]}'), 400, 'structure', 'Patient.generalPractitioner[0]'],
    [
      '$book with _status a string',
      post('/fhir/Appointment/$book', bookParameters([{ name: 'appt-resource', resource: { resourceType: 'Appointment', status: 'proposed', _status: 'x', start: '2027-01-01T10:00:00Z', end: '2027-01-01T10:30:00Z', slot: [{ reference: 'Slot/s1' }], participant: [{ actor: { reference: 'Patient/p1' }, status: 'accepted' }] } }])),
      400,
      'structure',
    ],
    ['a FHIRPath Patch whose part is an object', fhirPathPatch([{ name: 'operation', part: { name: 'type', valueCode: 'replace' } }]), 400, 'structure'],
    ['a FHIRPath Patch whose part is [null]', fhirPathPatch([{ name: 'operation', part: [null] }]), 400, 'structure'],
    [
      'a JSON Patch adding __proto__',
      () => request(app).patch('/fhir/Patient/p1').set('Content-Type', 'application/json-patch+json').send('[{"op":"add","path":"/__proto__","value":{"x":1}}]'),
      400,
      'invalid',
    ],
  ];
  // Rest parameters: rows without an expression must not make Jest take the last one for `done`.
  test.each(rows)('%s: refused, nothing stored', async (...[, send, status, code, expression]: Row) => {
    const before = await stored();
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code });
    if (expression) expect(res.body.issue[0].expression).toEqual([expression]);
    expect(await stored()).toEqual(before);
  });

  test('JSON nested 100 objects deep is within the limit (refused for other reasons, not its depth)', async () => {
    const res = await post('/fhir/Patient', nested(98))();
    expect(res.status).not.toBe(500);
    expect(JSON.stringify(res.body)).not.toContain('nested deeper');
  });

  test('a batch entry with a malformed url gets its own 400; the other entries run', async () => {
    const res = await post(
      '/fhir',
      bundle([
        { request: { method: 'GET', url: 'Patient/%E0%A4%A' } },
        { request: { method: 'GET', url: 'Patient/p1' } },
      ]),
    )();
    expect(res.status).toBe(200);
    expect(res.body.entry[0].response.status).toBe('400 Bad Request');
    expect(res.body.entry[0].response.outcome.issue[0]).toMatchObject({ code: 'invalid', expression: ['Bundle.entry[0].request.url'] });
    expect(res.body.entry[1].response.status).toBe('200 OK');
    expect(res.body.entry[1].resource.id).toBe('p1');
  });

  test('a transaction entry with a malformed url is 400 and commits nothing', async () => {
    const before = await stored();
    const res = await post(
      '/fhir',
      JSON.stringify({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient' } },
          { request: { method: 'GET', url: 'Patient/a%ZZ' } },
        ],
      }),
    )();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ code: 'invalid', expression: ['Bundle.entry[1].request.url'] });
    expect(await stored()).toEqual(before);
  });

  test('a transaction entry with ifNoneExist is 400 not-supported and commits nothing', async () => {
    const before = await stored();
    const res = await post(
      '/fhir',
      JSON.stringify({
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ request: { method: 'POST', url: 'Patient', ifNoneExist: 'identifier=a|b' }, resource: { resourceType: 'Patient' } }],
      }),
    )();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ code: 'not-supported' });
    expect(await stored()).toEqual(before);
  });

  test.each([
    ['an empty FHIRPath Patch', FHIR_JSON, { resourceType: 'Parameters' }],
    ['a FHIRPath Patch with no operations', FHIR_JSON, { resourceType: 'Parameters', parameter: [] }],
    ['an empty JSON Patch', 'application/json-patch+json', []],
  ])('%s answers 200 with the current version and writes none', async (_name, contentType, body) => {
    const before = await stored();
    const current = await request(app).get('/fhir/Patient/p1').expect(200);
    const res = await request(app).patch('/fhir/Patient/p1').set('Content-Type', contentType).send(JSON.stringify(body));
    expect(res.status).toBe(200);
    expect(res.body).toEqual(current.body);
    expect(res.headers.etag).toBe(current.headers.etag);
    expect(await stored()).toEqual(before);
  });

  test.each([
    ['100,000 unknown keys after "meta":"x"', `{"resourceType":"Patient","meta":"x",${Array.from({ length: 100000 }, (_, i) => `"k${i}":1`).join(',')}}`],
    ['100,000 unknown keys', `{"resourceType":"Patient",${Array.from({ length: 100000 }, (_, i) => `"k${i}":1`).join(',')}}`],
    ['50,000 family names that are numbers', `{"resourceType":"Patient","name":[${Array.from({ length: 50000 }, () => '{"family":5}').join(',')}]}`],
  ])('%s: 400 naming the first problems only, a small answer, nothing stored', async (_name, body) => {
    const before = await stored();
    const res = await post('/fhir/Patient', body)();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ severity: 'error', code: 'structure' });
    expect(res.body.issue.length).toBeLessThanOrEqual(101);
    expect(res.text.length).toBeLessThan(20_000);
    expect(await stored()).toEqual(before);
  });

  test.each([
    ['a boolean that is a string', '{"resourceType":"Patient","active":"true"}', 'Patient.active'],
    ['a string that is a number', '{"resourceType":"Patient","name":[{"family":5}]}', 'Patient.name[0].family'],
    ['a repeating string that holds an object', '{"resourceType":"Patient","name":[{"given":[{"x":1}]}]}', 'Patient.name[0].given[0]'],
    ['an integer that is a string', '{"resourceType":"Patient","multipleBirthInteger":"2"}', 'Patient.multipleBirthInteger'],
    ['an unknown element', '{"resourceType":"Patient","nickname":"x"}', 'Patient.nickname'],
    ['an unknown primitive extension', '{"resourceType":"Patient","_nickname":{}}', 'Patient._nickname'],
    // Our own fuzz run (seeds 2-4): each crashed medplum (500) or stored what XML could not answer.
    ['a single primitive\'s extension that is an array', '{"resourceType":"Patient","_gender":[null]}', 'Patient._gender'],
    ['a repeating primitive\'s extension that is an object', '{"resourceType":"Patient","name":[{"given":["a"],"_given":{}}]}', 'Patient.name[0]._given'],
    ['a single element that is an array', '{"resourceType":"Patient","gender":["female","male"]}', 'Patient.gender'],
    ['a repeating element that is not an array', '{"resourceType":"Patient","identifier":{"value":"x"}}', 'Patient.identifier'],
    ['a "_" sibling of a complex element', '{"resourceType":"Patient","_identifier":[{}]}', 'Patient._identifier'],
    ['a primitive extension holding other properties', '{"resourceType":"Patient","_gender":{"resourceType":"Foo"}}', 'Patient._gender.resourceType'],
    ['a resourceType inside a data type', '{"resourceType":"Patient","identifier":[{"resourceType":"Foo","value":"x"}]}', 'Patient.identifier[0].resourceType'],
    ['a string holding U+0001', '{"resourceType":"Patient","name":[{"family":"a\\u0001b"}]}', 'Patient.name[0].family'],
    ['a string holding U+FFFF', '{"resourceType":"Patient","name":[{"family":"a\\uffffb"}]}', 'Patient.name[0].family'],
    ['a string holding half a surrogate pair', '{"resourceType":"Patient","name":[{"family":"a\\ud800b"}]}', 'Patient.name[0].family'],
  ])('%s: 400 structure at the element', async (_name, body, expression) => {
    const res = await post('/fhir/Patient', body)();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ code: 'structure', expression: [expression] });
  });

  test.each([
    ['a valueUri that is an array', { name: 'cancelled-appt-id', valueUri: ['Appointment/x', 'Appointment/y'] }, 'Parameters.parameter[1].valueUri'],
    ['a part that is not an array', { name: 'cancelled-appt-id', part: { name: 'x' } }, 'Parameters.parameter[1].part'],
  ])('$book Parameters with %s: 400 structure before the operation reads it', async (_name, parameter, expression) => {
    const appointment = { resourceType: 'Appointment', status: 'proposed', start: '2027-01-01T10:00:00Z', end: '2027-01-01T10:30:00Z', slot: [{ reference: 'Slot/s1' }], participant: [{ actor: { reference: 'Patient/p1' }, status: 'accepted' }] };
    const before = await stored();
    const res = await post('/fhir/Appointment/$book', bookParameters([{ name: 'appt-resource', resource: appointment }, parameter]))();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ code: 'structure', expression: [expression] });
    expect(await stored()).toEqual(before);
  });

  test.each([
    ['a NUL in the id', '/fhir/Patient/%00/$meta'],
    ['a NUL in a batch entry url', undefined],
  ])('%s, answered as XML: a readable OperationOutcome, the character written as \\u0000', async (name, path) => {
    const res = path
      ? await request(app).get(path).set('Accept', 'application/fhir+xml')
      : await request(app).post('/fhir').set('Content-Type', FHIR_JSON).set('Accept', 'application/fhir+xml').send(bundle([{ request: { method: 'DELETE', url: 'Appointment/%00' } }]));
    expect(res.status).toBeLessThan(500);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+xml/);
    expect(res.text).toContain('OperationOutcome');
    expect(res.text).not.toContain('\u0000');
    expect(name).toBeTruthy();
  });

  test('a wrong shape 70 extensions deep inside a primitive extension (fuzz seed 10): 400, not a crash', async () => {
    const deep = `${'{"url":"http://x.test","extension":['.repeat(70)}"x"${']}'.repeat(70)}`;
    const res = await post('/fhir/Patient', `{"resourceType":"Patient","_gender":{"extension":[${deep}]}}`)();
    expect(res.status).toBe(400);
    expect(res.body.issue[0]).toMatchObject({ code: 'structure' });
  });

  test('a repeating primitive may hold null where its extension array carries the value', async () => {
    const res = await post('/fhir/Patient', '{"resourceType":"Patient","name":[{"given":["Erika",null],"_given":[null,{"extension":[{"url":"http://x.test/e","valueString":"y"}]}]}]}')();
    expect(res.status).toBe(201);
  });

  test('a HEAD whose headers are too large gets its 431 without a body', async () => {
    const server = http.createServer(app);
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.end(`HEAD /fhir/Slot?x=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
        let got = '';
        socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
        socket.on('end', () => resolve(got));
        socket.on('error', reject);
      });
      expect(raw).toMatch(/^HTTP\/1\.1 431 /);
      expect(raw.endsWith('\r\n\r\n')).toBe(true);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  test('a 10,000-parameter GET gets a 431 OperationOutcome, not a bare status line', async () => {
    const server = http.createServer(app);
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const query = Array.from({ length: 10000 }, (_, i) => `identifier=x${i}`).join('&');
      const res = await fetch(`http://127.0.0.1:${port}/fhir/Patient?${query}`);
      expect(res.status).toBe(431);
      expect(res.headers.get('svc-api-version')).toBeTruthy();
      const body = (await res.json()) as { resourceType: string; issue: { code: string }[] };
      expect(body.resourceType).toBe('OperationOutcome');
      expect(body.issue[0].code).toBe('too-costly');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
