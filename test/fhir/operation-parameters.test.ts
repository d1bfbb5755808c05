import type { OperationDefinition } from '@medplum/fhirtypes';
import { parseInputParameters } from '../../src/fhir/operations';
import { OperationOutcomeError } from '../../src/server-lib/outcomes';

/** A definition shaped like ISiK $book: one required resource, a uri, a Reference, a repeating code. */
const DEFINITION = {
  resourceType: 'OperationDefinition',
  name: 'Example',
  status: 'active',
  kind: 'operation',
  code: 'example',
  system: false,
  type: true,
  instance: false,
  affectsState: true,
  parameter: [
    { name: 'appt-resource', use: 'in', min: 1, max: '1', type: 'Appointment' },
    { name: 'cancelled-appt-id', use: 'in', min: 0, max: '1', type: 'uri' },
    { name: 'schedule', use: 'in', min: 0, max: '1', type: 'Reference' },
    { name: 'tag', use: 'in', min: 0, max: '*', type: 'code' },
    { name: 'return', use: 'out', min: 0, max: '1', type: 'Appointment' },
  ],
} as const satisfies OperationDefinition;

/** The same without side effects: it may be invoked with GET, its parameters in the URL. */
const READ_ONLY = { ...DEFINITION, code: 'look', affectsState: false } as const;

const appointment = { resourceType: 'Appointment', status: 'proposed', participant: [] } as const;
const parameters = (...parameter: unknown[]) => ({ resourceType: 'Parameters', parameter });
const call = (body: unknown, query: [string, string][] = []) => ({ body, query });

function refusal(f: () => unknown): { status: number; code?: string; diagnostics?: string; expression?: string[] } {
  try {
    f();
  } catch (err) {
    if (!(err instanceof OperationOutcomeError)) throw err;
    const issue = err.outcome.issue?.[0];
    return { status: err.status, code: issue?.code, diagnostics: issue?.diagnostics, expression: issue?.expression };
  }
  throw new Error('expected a refusal');
}

describe('operation parameters parsed from the definition', () => {
  test('a Parameters body: each declared input typed by the definition, max 1 one value, max * a list', () => {
    const p = parseInputParameters(
      DEFINITION,
      call(
        parameters(
          { name: 'appt-resource', resource: appointment },
          { name: 'cancelled-appt-id', valueUri: 'Appointment/old' },
          { name: 'schedule', valueReference: { reference: 'Schedule/s1' } },
          { name: 'tag', valueCode: 'a' },
          { name: 'tag', valueCode: 'b' },
        ),
      ),
    );
    expect(p).toEqual({ 'appt-resource': appointment, 'cancelled-appt-id': 'Appointment/old', schedule: { reference: 'Schedule/s1' }, tag: ['a', 'b'] });
  });

  test('the resource of the one required resource parameter may be the body itself', () => {
    expect(parseInputParameters(DEFINITION, call(appointment))).toEqual({ 'appt-resource': appointment, 'cancelled-appt-id': undefined, schedule: undefined, tag: [] });
  });

  test('a primitive parameter is read from another primitive value[x] too (valueString for a uri)', () => {
    const p = parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: appointment }, { name: 'cancelled-appt-id', valueString: 'old' })));
    expect(p['cancelled-appt-id']).toBe('old');
  });

  test('an operation that does not affect state reads the URL too, leaving its general parameters (_format) alone', () => {
    const p = parseInputParameters(READ_ONLY, call(appointment, [['tag', 'x'], ['_format', 'json'], ['cancelled-appt-id', 'old']]));
    expect([p.tag, p['cancelled-appt-id']]).toEqual([['x'], 'old']);
  });

  const refusals: [string, () => unknown, number, string, string, string][] = [
    [
      'an unknown name: the parameters of the definition listed',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: appointment }, { name: 'slot', valueString: 'x' }))),
      400,
      'invalid',
      'Unknown $example parameter "slot": the parameters of $example are appt-resource, cancelled-appt-id, schedule, tag',
      'Parameters.parameter.name',
    ],
    [
      'an unknown name in the URL of an operation read by GET',
      () => parseInputParameters(READ_ONLY, call(appointment, [['slot', 'x']])),
      400,
      'invalid',
      'Unknown $look parameter "slot": the parameters of $look are appt-resource, cancelled-appt-id, schedule, tag',
      'slot',
    ],
    [
      'a required parameter missing',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'tag', valueCode: 'a' }))),
      400,
      'required',
      '$example needs the appt-resource parameter',
      "Parameters.parameter.where(name='appt-resource')",
    ],
    [
      'a max 1 parameter given twice',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: appointment }, { name: 'appt-resource', resource: appointment }))),
      400,
      'invalid',
      '$example parameter "appt-resource" given more than once',
      "Parameters.parameter.where(name='appt-resource')",
    ],
    [
      'a resource of another type',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: { resourceType: 'Patient' } }))),
      400,
      'invalid',
      '$example parameter "appt-resource" must carry an Appointment resource',
      "Parameters.parameter.where(name='appt-resource').resource",
    ],
    [
      'a Reference parameter without valueReference',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: appointment }, { name: 'schedule', valueString: 'Schedule/s1' }))),
      400,
      'value',
      '$example parameter "schedule" must carry a valueReference',
      "Parameters.parameter.where(name='schedule')",
    ],
    [
      'a primitive parameter without a value',
      () => parseInputParameters(DEFINITION, call(parameters({ name: 'appt-resource', resource: appointment }, { name: 'cancelled-appt-id', resource: appointment }))),
      400,
      'value',
      '$example parameter "cancelled-appt-id" must carry a uri value',
      "Parameters.parameter.where(name='cancelled-appt-id')",
    ],
    [
      'a resource in the URL',
      () => parseInputParameters(READ_ONLY, call(undefined, [['appt-resource', 'x']])),
      400,
      'invalid',
      '$look parameter "appt-resource" carries a resource: it goes in a Parameters body',
      'appt-resource',
    ],
    ['a body of another type', () => parseInputParameters(DEFINITION, call({ resourceType: 'Patient' })), 400, 'invalid', '$example takes an Appointment or Parameters, not Patient', 'resourceType'],
    ['an entry that is no object', () => parseInputParameters(DEFINITION, call(parameters(null))), 400, 'structure', 'Parameters.parameter[0] must be an object', 'Parameters.parameter[0]'],
  ];

  test.each(refusals)('%s', (_name, parse, status, code, diagnostics, expression) => {
    expect(refusal(parse)).toEqual({ status, code, diagnostics, expression: [expression] });
  });

  test('the URL of an operation that affects state is not read', () => {
    expect(parseInputParameters(DEFINITION, call(appointment, [['slot', 'x']])).tag).toEqual([]);
  });
});
