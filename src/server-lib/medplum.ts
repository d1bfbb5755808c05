// The only entry point to @medplum/core in this project: the shim import must run before medplum
// loads (see websocket-shim.ts), which a single import site guarantees.
import './websocket-shim';

export * from '@medplum/core';

import { getTypedPropertyValueWithPath, parseFhirPath, type FhirPathAtom, type TypedValue, type TypedValueWithPath } from '@medplum/core';

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
    const found = getTypedPropertyValueWithPath(node, name);
    for (const f of Array.isArray(found) ? found : [found]) if (f?.value !== undefined) out.push(f);
  }
  return out;
}
