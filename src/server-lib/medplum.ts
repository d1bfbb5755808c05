// The only entry point to @medplum/core in this project: the shim import must run before medplum
// loads (see websocket-shim.ts), which a single import site guarantees.
import './websocket-shim';

export * from '@medplum/core';

import { evalFhirPathTyped, getElementDefinition, getTypedPropertyValueWithPath, isResource, parseFhirPath, type FhirPathAtom, type TypedValue, type TypedValueWithPath } from '@medplum/core';

const atoms = new Map<string, FhirPathAtom>();

/**
 * The parsed form of a FHIRPath expression of the (static) profiles and search parameters, parsed
 * once per process: `evalFhirPathTyped` given a string parses it again on every call.
 */
export function compiledFhirPath(expression: string): FhirPathAtom {
  let atom = atoms.get(expression);
  if (!atom) {
    atom = parseFhirPath(expression);
    atoms.set(expression, atom);
  }
  return atom;
}

/**
 * True when a FHIR JSON object has no element `name` at all: no `name`, no primitive extension
 * `_name`, no choice form (`valueQuantity` for `value`). FHIRPath then finds nothing there; medplum
 * takes about 15 µs to find an element absent, so the hot paths (index extraction, profile
 * checks of every write) ask this first (docs/requirements.md#performance-aims).
 */
export function lacksElement(o: Record<string, unknown>, name: string): boolean {
  if (o[name] !== undefined || `_${name}` in o) return false;
  for (const key of Object.keys(o)) {
    const k = key.startsWith('_') ? key.slice(1) : key;
    if (k.length > name.length && k.startsWith(name) && k[name.length] >= 'A' && k[name.length] <= 'Z') return false;
  }
  return true;
}

/**
 * FHIRPath's member step `name` (an element name) on `nodes`, as medplum's evaluator makes it
 * (members of objects only, present values only), without evaluating an expression around it:
 * a third of the time, and nothing at all for an absent element.
 */
export function memberValues(nodes: readonly TypedValue[], name: string): TypedValueWithPath[] {
  const out: TypedValueWithPath[] = [];
  for (const node of nodes) {
    const value = node.value as Record<string, unknown> | undefined;
    if (!value || typeof value !== 'object') continue;
    if (!Array.isArray(value) && lacksElement(value, name)) continue;
    if (value.resourceType === name) {
      out.push(node as TypedValueWithPath);
      continue;
    }
    if (!Array.isArray(value) && `_${name}` in value) {
      // A primitive with an extension: medplum's typed step gives a String object carrying it, where
      // FHIRPath gives the primitive value.
      out.push(...(evalFhirPathTyped(compiledFhirPath(name), [node]) as TypedValueWithPath[]));
      continue;
    }
    const found = getTypedPropertyValueWithPath(node, name);
    for (const f of Array.isArray(found) ? found : [found]) if (f?.value !== undefined) out.push(f);
  }
  return out;
}

const singleTypes = new Map<string, Map<string, string | null>>();

/**
 * The one type element `name` of `type` has in medplum's schema, or null where medplum's member
 * step has more to decide: a choice element (`value[x]`), several types, or a type the schema
 * does not know.
 */
function singleElementType(type: string, name: string): string | null {
  let ofType = singleTypes.get(type);
  if (!ofType) singleTypes.set(type, (ofType = new Map()));
  let found = ofType.get(name);
  if (found === undefined) {
    const element = getElementDefinition(type, name);
    found = element && !element.path.endsWith('[x]') && element.type?.length === 1 ? element.type[0].code : null;
    ofType.set(name, found);
  }
  return found;
}

/** Medplum's emptiness: null, an empty string, array or object. */
function isEmptyValue(v: unknown): boolean {
  if (v === null || v === undefined) return true;
  if (typeof v === 'string') return v === '';
  if (typeof v === 'object') {
    if (Array.isArray(v)) return v.length === 0;
    for (const _ in v) return false;
    return true;
  }
  return false;
}

/**
 * `memberValues` for elements of one type, read straight from the JSON with the type the schema
 * gives (a `Resource` element typed by its `resourceType`), as medplum's typed step does: about a
 * tenth of the time, which a bulk load of millions of resources feels. Undefined where this
 * cannot tell (a primitive's extension `_name`, a choice or several types, an array node): the
 * caller then takes medplum's step.
 */
export function singleTypeMemberValues(nodes: readonly TypedValue[], name: string): TypedValue[] | undefined {
  const out: TypedValue[] = [];
  for (const node of nodes) {
    const value = node.value as Record<string, unknown> | undefined;
    if (!value || typeof value !== 'object') continue;
    if (Array.isArray(value) || `_${name}` in value) return undefined;
    const v = value[name];
    if (v === undefined) {
      if (lacksElement(value, name)) continue;
      return undefined;
    }
    const type = singleElementType(node.type, name);
    if (type === null) return undefined;
    if (isEmptyValue(v)) continue;
    for (const item of Array.isArray(v) ? v : [v]) {
      if (item === undefined) continue;
      out.push({ type: type === 'Resource' && isResource(item) ? item.resourceType : type, value: item });
    }
  }
  return out;
}
