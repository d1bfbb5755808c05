import type { ExtractResource, ParametersParameter, Reference, Resource, ResourceType } from '@medplum/fhirtypes';
import { badRequest } from '../../server-lib/outcomes';
import type { FhirRequest } from '../request';

/** A parameter as an operation's typed constant declares it (`as const satisfies OperationDefinition`). */
export interface DeclaredParameter {
  readonly name: string;
  readonly use: 'in' | 'out';
  readonly min: number;
  readonly max: string;
  /** A resource type (`Appointment`), `Resource`, `Reference` or a primitive type (`uri`, `string`, `code`, ...). */
  readonly type: ResourceType | 'Resource' | 'Reference' | Lowercase<string>;
}

/** What the parser reads of a definition: its code, whether it affects state, its parameters. */
export interface ParameterisedDefinition {
  readonly code: string;
  readonly affectsState?: boolean;
  readonly parameter?: readonly DeclaredParameter[];
}

type InputsOf<D extends ParameterisedDefinition> = Extract<NonNullable<D['parameter']>[number], { readonly use: 'in' }>;
type ValueOf<T> = T extends ResourceType ? ExtractResource<T> : T extends 'Resource' ? Resource : T extends 'Reference' ? Reference : string;
type Cardinality<P extends DeclaredParameter> = P['max'] extends '1' ? (P['min'] extends 0 ? ValueOf<P['type']> | undefined : ValueOf<P['type']>) : ValueOf<P['type']>[];

/**
 * The input parameters of one call, typed from the definition: a resource parameter is that
 * resource, a `Reference` a Reference, a primitive its text; `max` 1 one value (or undefined when
 * `min` is 0), otherwise a list.
 */
export type InputParameters<D extends ParameterisedDefinition> = { [P in InputsOf<D> as P['name']]: Cardinality<P> };

/** One parameter as the caller sent it: an entry of the Parameters body, or a pair of the URL. */
interface Given {
  name: string;
  parameter: ParametersParameter;
  from: 'body' | 'query';
}

/**
 * The input parameters of a call to the operation `definition` describes (as Medplum's
 * `parseInputParameters`): names, cardinality and types are the definition's, and a parameter it
 * does not declare is refused with the list of those it does. They come from a `Parameters` body,
 * from the body itself when it is the resource of the operation's one required resource parameter
 * (ISiK Terminplanung `$book`: a bare Appointment), and for an operation that does not affect
 * state from the URL too (FHIR R4 operations.html: such an operation may be invoked with GET);
 * the URL's general parameters (`_format`, `_pretty`, ...) are not the operation's.
 */
export function parseInputParameters<D extends ParameterisedDefinition>(definition: D, req: Pick<FhirRequest, 'query' | 'body'>): InputParameters<D> {
  const op = `$${definition.code}`;
  const inputs = (definition.parameter ?? []).filter((p) => p.use === 'in');
  const given = [...(definition.affectsState === false ? fromQuery(req.query) : []), ...fromBody(op, inputs, req.body)];
  for (const g of given) {
    if (!inputs.some((p) => p.name === g.name)) {
      throw badRequest(`Unknown ${op} parameter "${g.name}": the parameters of ${op} are ${inputs.map((p) => p.name).join(', ')}`, g.from === 'body' ? 'Parameters.parameter.name' : g.name);
    }
  }
  const parsed: Record<string, unknown> = {};
  for (const p of inputs) {
    const mine = given.filter((g) => g.name === p.name);
    if (mine.length < p.min) throw badRequest(`${op} needs the ${p.name} parameter`, where(p.name), 'required');
    if (p.max !== '*' && mine.length > Number(p.max)) {
      throw badRequest(p.max === '1' ? `${op} parameter "${p.name}" given more than once` : `${op} parameter "${p.name}" given ${mine.length} times, at most ${p.max}`, where(p.name));
    }
    const values = mine.map((g) => valueOf(op, p, g));
    parsed[p.name] = p.max === '1' ? values[0] : values;
  }
  return parsed as InputParameters<D>;
}

function fromQuery(query: [string, string][]): Given[] {
  return query.filter(([name]) => !name.startsWith('_')).map(([name, value]) => ({ name, parameter: { name, valueString: value }, from: 'query' }));
}

function fromBody(op: string, inputs: readonly DeclaredParameter[], body: unknown): Given[] {
  if (body === undefined) return [];
  const bare = bareParameter(inputs);
  const alternative = bare ? `${article(bare.type)} ${bare.type} or ` : '';
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest(`${op} needs ${alternative}a Parameters body`, undefined, 'structure');
  const resource = body as Resource;
  if (resource.resourceType !== 'Parameters') {
    if (bare && resource.resourceType === bare.type) return [{ name: bare.name, parameter: { name: bare.name, resource }, from: 'body' }];
    throw badRequest(`${op} takes ${alternative}Parameters, not ${String(resource.resourceType)}`, 'resourceType');
  }
  const parameters: unknown = resource.parameter ?? [];
  if (!Array.isArray(parameters)) throw badRequest('Parameters.parameter must be an array', 'Parameters.parameter', 'structure');
  return parameters.map((p: unknown, i) => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw badRequest(`Parameters.parameter[${i}] must be an object`, `Parameters.parameter[${i}]`, 'structure');
    const parameter = p as ParametersParameter;
    return { name: String(parameter.name), parameter, from: 'body' as const };
  });
}

/** The one required input, when it is a resource: it may be sent as the body itself. */
function bareParameter(inputs: readonly DeclaredParameter[]): DeclaredParameter | undefined {
  const required = inputs.filter((p) => p.min > 0);
  return required.length === 1 && kindOf(required[0].type) === 'resource' && required[0].type !== 'Resource' ? required[0] : undefined;
}

function valueOf(op: string, p: DeclaredParameter, g: Given): unknown {
  const kind = kindOf(p.type);
  if (kind === 'resource') {
    if (g.from === 'query') throw badRequest(`${op} parameter "${p.name}" carries a resource: it goes in a Parameters body`, p.name);
    const resource = g.parameter.resource;
    if (!resource || (p.type !== 'Resource' && resource.resourceType !== p.type)) {
      throw badRequest(`${op} parameter "${p.name}" must carry ${article(p.type)} ${p.type} resource`, `${where(p.name)}.resource`);
    }
    return resource;
  }
  if (kind === 'reference') {
    if (g.from === 'query') return { reference: g.parameter.valueString };
    const reference = g.parameter.valueReference;
    if (!reference || typeof reference !== 'object') throw badRequest(`${op} parameter "${p.name}" must carry a valueReference`, where(p.name), 'value');
    return reference;
  }
  const text = primitiveText(g.parameter, p.type);
  if (text === undefined) throw badRequest(`${op} parameter "${p.name}" must carry ${article(p.type)} ${p.type} value`, where(p.name), 'value');
  return text;
}

/**
 * A primitive parameter as text: its declared `value[x]`, or, as clients often send, another
 * primitive one (`valueString` for a uri, `valueInteger` for an event number).
 */
function primitiveText(parameter: ParametersParameter, type: string): string | undefined {
  const record = parameter as unknown as Record<string, unknown>;
  const declared = record[`value${type[0].toUpperCase()}${type.slice(1)}`];
  const value = declared ?? Object.entries(record).find(([key, v]) => key.startsWith('value') && ['string', 'number', 'boolean'].includes(typeof v))?.[1];
  return value === undefined || value === null || typeof value === 'object' ? undefined : String(value);
}

/** FHIR type names: primitives are lower case, data types and resources upper case; `Reference` is the one data type read here. */
function kindOf(type: string): 'resource' | 'reference' | 'primitive' {
  if (type === 'Reference') return 'reference';
  return /^[a-z]/.test(type) ? 'primitive' : 'resource';
}

function where(name: string): string {
  return `Parameters.parameter.where(name='${name}')`;
}

/** `an Appointment`, `an id`, `a uri`. */
function article(word: string): string {
  return /^[AEIOaeio]/.test(word) ? 'an' : 'a';
}
