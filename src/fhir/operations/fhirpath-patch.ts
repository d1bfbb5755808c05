import type { Parameters, ParametersParameter, Resource } from '@medplum/fhirtypes';
import { evalFhirPathTyped, parseFhirPath, toTypedValue, tryGetDataType, type TypedValue } from '../../server-lib/medplum';
import { ensureR4Schema } from '../../server-lib/r4-definitions';
import { malformed, unappliable } from './patch-error';

/**
 * FHIRPath Patch (FHIR R4 fhirpatch.html; ISiK Terminplanung 6.0.0): `Parameters` with one `operation` per
 * step (add, insert, delete, replace, move), applied in order to a copy of the resource. Paths are
 * evaluated by medplum's FHIRPath engine; the engine's results are located in the resource by
 * object identity (complex values) or by position among the candidates (primitives).
 */
export function applyFhirPathPatch<T extends Resource>(resource: T, patch: unknown): T {
  ensureR4Schema();
  if (!isObject(patch) || patch.resourceType !== 'Parameters') {
    throw malformed(`A FHIRPath Patch is a Parameters resource, not ${isObject(patch) ? String(patch.resourceType) : typeof patch}`, 'resourceType');
  }
  const parameters = (patch as unknown as Parameters).parameter ?? [];
  if (!Array.isArray(parameters)) throw malformed('Parameters.parameter must be an array', 'Parameters.parameter', 'structure');
  const target = structuredClone(resource);
  for (const [i, p] of parameters.entries()) {
    if (!isObject(p)) throw malformed(`Parameters.parameter[${i}] must be an object`, `Parameters.parameter[${i}]`, 'structure');
    if (p.name !== 'operation') throw malformed(`Parameters.parameter[${i}]: unknown name "${String(p.name)}", expected "operation"`, `Parameters.parameter[${i}].name`);
    applyOperation(target, readOperation(p, i));
  }
  // FHIR has no empty elements: deleting the last child of an element deletes the element.
  return pruneEmpty(target) as T;
}

function pruneEmpty(node: unknown): unknown {
  if (Array.isArray(node)) {
    const items = node.map(pruneEmpty).filter((v) => v !== undefined);
    return items.length ? items : undefined;
  }
  if (isObject(node)) {
    const entries = Object.entries(node)
      .map(([k, v]) => [k, pruneEmpty(v)] as const)
      .filter(([, v]) => v !== undefined);
    return entries.length ? Object.fromEntries(entries) : undefined;
  }
  return node;
}

type OperationType = 'add' | 'insert' | 'delete' | 'replace' | 'move';

interface Operation {
  type: OperationType;
  path: string;
  name?: string;
  value?: { value: unknown; type?: string };
  index?: number;
  source?: number;
  destination?: number;
  where: string;
}

const TYPES = new Set<OperationType>(['add', 'insert', 'delete', 'replace', 'move']);
/** Functions that walk the whole tree or log: not needed to name an element, costly on hostile input. */
const FORBIDDEN_FUNCTIONS = /\b(descendants|repeat|trace|aggregate)\s*\(/;
const MAX_PATH = 1000;

/** `part` of a parameter: absent, or an array of objects with a string name (R4 Parameters). */
function partsOf(p: ParametersParameter, where: string): ParametersParameter[] {
  const parts: unknown = p.part;
  if (parts === undefined) return [];
  if (!Array.isArray(parts)) throw malformed(`${where}.part must be an array`, `${where}.part`, 'structure');
  parts.forEach((part, j) => {
    if (!isObject(part)) throw malformed(`${where}.part[${j}] must be an object`, `${where}.part[${j}]`, 'structure');
    if ((part as { name?: unknown }).name !== undefined && typeof (part as { name?: unknown }).name !== 'string') {
      throw malformed(`${where}.part[${j}].name must be a string`, `${where}.part[${j}].name`, 'structure');
    }
  });
  return parts as ParametersParameter[];
}

function readOperation(p: ParametersParameter, i: number): Operation {
  const where = `Parameters.parameter[${i}]`;
  const parts = new Map<string, ParametersParameter>();
  for (const part of partsOf(p, where)) {
    if (!part.name) throw malformed(`${where}: a part without name`, `${where}.part`);
    if (parts.has(part.name)) throw malformed(`${where}: part "${part.name}" given twice`, `${where}.part`);
    parts.set(part.name, part);
  }
  const type = parts.get('type')?.valueCode ?? parts.get('type')?.valueString;
  if (!type || !TYPES.has(type as OperationType)) throw malformed(`${where}: type must be one of add, insert, delete, replace, move`, `${where}.part.where(name='type')`, type ? 'code-invalid' : 'required');
  const path = parts.get('path')?.valueString;
  if (!path) throw malformed(`${where}: path is required`, `${where}.part.where(name='path')`, 'required');
  if (path.length > MAX_PATH || FORBIDDEN_FUNCTIONS.test(path)) throw malformed(`${where}: path is too long or uses a function not allowed in patches`, `${where}.part.where(name='path')`, 'too-costly');
  const valuePart = parts.get('value');
  const op: Operation = {
    type: type as OperationType,
    path,
    name: parts.get('name')?.valueString,
    value: valuePart ? readValue(valuePart, `${where}.part.where(name='value')`) : undefined,
    index: parts.get('index')?.valueInteger,
    source: parts.get('source')?.valueInteger,
    destination: parts.get('destination')?.valueInteger,
    where,
  };
  const needs: Record<OperationType, (keyof Operation)[]> = {
    add: ['name', 'value'],
    insert: ['value', 'index'],
    delete: [],
    replace: ['value'],
    move: ['source', 'destination'],
  };
  for (const key of needs[op.type]) {
    if (op[key] === undefined) throw malformed(`${where}: ${op.type} needs ${key}`, `${where}.part.where(name='${key}')`, 'required');
  }
  return op;
}

/** `value[x]` of a part, or an anonymous type given as nested parts. */
function readValue(part: ParametersParameter, where: string): { value: unknown; type?: string } {
  const keys = Object.keys(part).filter((k) => /^value[A-Z]/.test(k));
  if (keys.length > 1) throw malformed(`${where}: more than one value[x]`, where);
  if (keys.length === 1) return { value: (part as unknown as Record<string, unknown>)[keys[0]], type: typeName(keys[0].slice(5)) };
  if (part.resource) return { value: part.resource, type: part.resource.resourceType };
  const subParts = partsOf(part, where);
  if (subParts.length) {
    // A Map: a part named `__proto__` or `constructor` is a name like any other here (the
    // validator then refuses it as an element).
    const obj = new Map<string, unknown[]>();
    for (const sub of subParts) {
      if (!sub.name) throw malformed(`${where}: a part without name`, where);
      const values = obj.get(sub.name) ?? [];
      values.push(readValue(sub, `${where}.part.where(name='${sub.name}')`).value);
      obj.set(sub.name, values);
    }
    return { value: Object.fromEntries([...obj].map(([k, v]) => [k, v.length === 1 ? v[0] : v])) };
  }
  throw malformed(`${where}: value is empty`, where, 'required');
}

/** `valueCodeableConcept` -> CodeableConcept, `valueDate` -> date. */
function typeName(suffix: string): string {
  const complex = tryGetDataType(suffix);
  return complex ? suffix : suffix.charAt(0).toLowerCase() + suffix.slice(1);
}

function applyOperation(resource: Resource, op: Operation): void {
  switch (op.type) {
    case 'add':
      return add(resource, op);
    case 'insert':
      return insert(resource, op);
    case 'delete':
      return remove(resource, op);
    case 'replace':
      return replace(resource, op);
    case 'move':
      return move(resource, op);
  }
}

function add(resource: Resource, op: Operation): void {
  const targets = evaluate(resource, parse(op)).filter((t) => isObject(t.value));
  if (targets.length === 0) throw unappliable(`No content found at ${op.path} when adding`, op.path);
  if (targets.length > 1) throw unappliable(`${op.path} matches ${targets.length} elements; add needs exactly one`, op.path);
  const parent = targets[0].value as Record<string, unknown>;
  const element = elementOf(targets[0].type, op.name!, op.value!.type);
  checkType(element.types, op.value!, `${op.path}.${op.name}`);
  const current = parent[element.key];
  if (element.isArray || Array.isArray(current)) {
    parent[element.key] = [...(Array.isArray(current) ? current : current === undefined ? [] : [current]), op.value!.value];
  } else if (current === undefined) {
    parent[element.key] = op.value!.value;
  } else {
    throw unappliable(`${op.path}.${op.name} already has a value; use replace`, `${op.path}.${op.name}`);
  }
}

function insert(resource: Resource, op: Operation): void {
  const { list, parent, key } = listAt(resource, op);
  if (op.index! < 0 || op.index! > list.length) throw unappliable(`index ${op.index} is outside 0..${list.length} of ${op.path}`, op.path);
  list.splice(op.index!, 0, op.value!.value);
  parent[key] = list;
}

function move(resource: Resource, op: Operation): void {
  const { list } = listAt(resource, op);
  const inRange = (n: number) => n >= 0 && n < list.length;
  if (!inRange(op.source!) || !inRange(op.destination!)) throw unappliable(`source and destination must lie within 0..${list.length - 1} of ${op.path}`, op.path);
  const [item] = list.splice(op.source!, 1);
  list.splice(op.destination!, 0, item);
}

function remove(resource: Resource, op: Operation): void {
  const found = locate(resource, parse(op).child);
  // fhirpatch.html: delete removes the element "if found".
  if (found.length === 0) return;
  if (found.length > 1) throw unappliable(`${op.path} matches ${found.length} elements; delete needs exactly one`, op.path);
  const { parent, key, index } = found[0];
  if (index === undefined) {
    delete parent[key];
    delete parent[`_${key}`];
    return;
  }
  const list = parent[key] as unknown[];
  list.splice(index, 1);
  const ext = parent[`_${key}`];
  if (Array.isArray(ext)) ext.splice(index, 1);
  if (list.length === 0) {
    delete parent[key];
    delete parent[`_${key}`];
  }
}

function replace(resource: Resource, op: Operation): void {
  const atom = parse(op);
  const found = locate(resource, atom.child);
  if (found.length === 0) throw unappliable(`No content found at ${op.path} when replacing`, op.path);
  if (found.length > 1) throw unappliable(`${op.path} matches ${found.length} elements; replace needs exactly one`, op.path);
  const typed = evaluate(resource, atom);
  if (typed[0]) checkType([typed[0].type], op.value!, op.path);
  const { parent, key, index } = found[0];
  if (index === undefined) parent[key] = op.value!.value;
  else (parent[key] as unknown[])[index] = op.value!.value;
}

/** The list a path names (insert, move): its last step must be an element name. */
function listAt(resource: Resource, op: Operation): { list: unknown[]; parent: Record<string, unknown>; key: string } {
  const node = parse(op).child;
  const [left, name] = isDot(node) && isSymbol(node.right) ? [node.left, node.right.name] : isSymbol(node) ? [undefined, node.name] : [undefined, undefined];
  if (!name) throw unappliable(`${op.path} must end with the name of a list element for ${op.type}`, op.path);
  const parents = (left ? evalAtom(resource, left) : [toTypedValue(resource)]).filter((t) => isObject(t.value));
  if (parents.length !== 1) throw unappliable(`${op.path} must name exactly one list`, op.path);
  const parent = parents[0].value as Record<string, unknown>;
  const current = parent[name];
  if (current !== undefined && !Array.isArray(current)) throw unappliable(`${op.path} is not a list`, op.path);
  return { list: (current as unknown[] | undefined) ?? [], parent, key: name };
}

// ---- locating FHIRPath results in the resource ----

interface Location {
  parent: Record<string, unknown>;
  key: string;
  index?: number;
}

interface Atom {
  eval(context: unknown, input: TypedValue[]): TypedValue[];
  toString(): string;
}
interface DotAtom extends Atom {
  operator: '.';
  left: Atom;
  right: Atom;
}
interface IndexerAtom extends Atom {
  left: Atom;
  expr: Atom;
}
interface SymbolAtom extends Atom {
  name: string;
}
interface FunctionAtom extends Atom {
  name: string;
  args: Atom[];
}
interface RootAtom extends Atom {
  child: Atom;
}

const isDot = (a: Atom): a is DotAtom => (a as DotAtom).operator === '.' && !!(a as DotAtom).left && !!(a as DotAtom).right;
const isIndexer = (a: Atom): a is IndexerAtom => 'expr' in a && 'left' in a && !('operator' in a);
const isFunction = (a: Atom): a is FunctionAtom => typeof (a as FunctionAtom).name === 'string' && Array.isArray((a as FunctionAtom).args);
const isSymbol = (a: Atom): a is SymbolAtom => typeof (a as SymbolAtom).name === 'string' && !isFunction(a);

function parse(op: Operation): RootAtom {
  try {
    return parseFhirPath(op.path) as unknown as RootAtom;
  } catch (err) {
    throw malformed(`${op.where}: path "${op.path}" is not valid FHIRPath (${(err as Error).message})`, `${op.where}.part.where(name='path')`);
  }
}

function evaluate(resource: Resource, atom: RootAtom): TypedValue[] {
  try {
    return evalFhirPathTyped(atom as never, [toTypedValue(resource)]);
  } catch (err) {
    throw unappliable(`path "${atom.toString()}" cannot be evaluated: ${(err as Error).message}`, atom.toString());
  }
}

function evalAtom(resource: Resource, atom: Atom): TypedValue[] {
  return evaluate(resource, { child: atom, eval: atom.eval.bind(atom), toString: () => atom.toString() } as RootAtom);
}

/** Where each element the path selects sits in the resource (parent object, key, list index). */
function locate(resource: Resource, node: Atom): Location[] {
  if (isSymbol(node)) {
    if (node.name === resource.resourceType) return [];
    return childrenOf(resource as unknown as Record<string, unknown>, node.name);
  }
  if (isDot(node) && isSymbol(node.right)) {
    const name = node.right.name;
    return evalAtom(resource, node.left)
      .map((t) => t.value)
      .filter(isObject)
      .flatMap((parent) => childrenOf(parent, name));
  }
  const inner = isIndexer(node) ? node.left : isDot(node) && isFunction(node.right) ? node.left : undefined;
  if (!inner) throw unappliable(`${node.toString()} does not name elements of the resource`, node.toString());
  // Filters (where, first, [n], ofType, ...) keep a subsequence of their input, in order.
  const candidates = locate(resource, inner);
  const results = evalAtom(resource, node).map((t) => t.value);
  const out: Location[] = [];
  let j = 0;
  for (const r of results) {
    while (j < candidates.length && valueAt(candidates[j]) !== r) j++;
    if (j === candidates.length) throw unappliable(`${node.toString()} does not name elements of the resource`, node.toString());
    out.push(candidates[j++]);
  }
  return out;
}

function childrenOf(parent: Record<string, unknown>, name: string): Location[] {
  const key = Object.hasOwn(parent, name) ? name : Object.keys(parent).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length)));
  if (!key || parent[key] === undefined) return [];
  const v = parent[key];
  return Array.isArray(v) ? v.map((_, index) => ({ parent, key, index })) : [{ parent, key }];
}

const valueAt = (l: Location): unknown => (l.index === undefined ? l.parent[l.key] : (l.parent[l.key] as unknown[])[l.index]);

// ---- types ----

/** JSON key, cardinality and allowed types of element `name` of type `parentType`. */
function elementOf(parentType: string, name: string, valueType?: string): { key: string; isArray: boolean; types: string[] } {
  const schema = tryGetDataType(parentType);
  // Own properties only: `constructor` or `toString` must not find Object.prototype's members.
  const defined = (n: string) => (schema && Object.hasOwn(schema.elements, n) ? schema.elements[n] : undefined);
  const element = defined(name);
  if (element) return { key: name, isArray: element.isArray ?? false, types: element.type.map((t) => t.code) };
  const choice = defined(`${name}[x]`);
  if (choice) {
    if (!valueType) throw unappliable(`${name} is a choice element; its value needs a type`, name);
    const allowed = choice.type.map((t) => t.code);
    if (!allowed.includes(valueType)) throw unappliable(`${name} does not take ${valueType} (allowed: ${allowed.join(', ')})`, name, 'value');
    return { key: `${name}${valueType.charAt(0).toUpperCase()}${valueType.slice(1)}`, isArray: false, types: [valueType] };
  }
  if (schema) throw unappliable(`${parentType} has no element ${name}`, name);
  return { key: name, isArray: false, types: [] };
}

const FAMILIES: string[][] = [
  ['string', 'code', 'id', 'markdown', 'uri', 'url', 'canonical', 'oid', 'uuid', 'base64Binary', 'xhtml'],
  ['date', 'dateTime', 'instant'],
  ['integer', 'positiveInt', 'unsignedInt', 'decimal', 'integer64'],
  ['boolean'],
  ['time'],
];
const PRIMITIVE = new Set(FAMILIES.flat());
const family = (t: string) => FAMILIES.findIndex((f) => f.includes(t));

/** fhirpatch.html: a value of the wrong type for its target is an error. */
function checkType(targetTypes: string[], value: { value: unknown; type?: string }, where: string): void {
  const types = targetTypes.filter(Boolean);
  if (types.length === 0) return;
  if (!value.type) {
    // An anonymous type (nested parts) fits backbone elements only.
    if (types.some((t) => PRIMITIVE.has(t))) throw unappliable(`${where} takes a ${types.join(' or ')}, not a structure`, where, 'value');
    return;
  }
  const fits = types.some((t) => {
    if (t === value.type || t === 'Element' || t === 'BackboneElement' || t === 'Resource') return true;
    if (PRIMITIVE.has(t) && PRIMITIVE.has(value.type!)) return family(t) === family(value.type!);
    return false;
  });
  if (!fits) throw unappliable(`${where} takes a ${types.join(' or ')}, not a ${value.type}`, where, 'value');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
