// The only entry point to @medplum/core in this project: the shim import must run before medplum
// loads (see websocket-shim.ts), which a single import site guarantees.
import './websocket-shim';

export * from '@medplum/core';

import { parseFhirPath, type FhirPathAtom } from '@medplum/core';

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
