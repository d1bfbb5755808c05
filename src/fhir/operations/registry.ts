import type { OperationDefinition } from '@medplum/fhirtypes';
import type { ScopeNeed } from '../../common/smart-scopes';
import type { FhirEnv, FhirRequest, FhirResponse } from '../request';

/** Where an operation is invoked: its type (`Appointment/$book`) and instance (`Subscription/s1/$events`), if any. */
export interface OperationTarget {
  type?: string;
  id?: string;
}

/**
 * A FHIR operation, whole in one module: its definition (routing by `code` and `resource`, GET
 * when it does not affect state, its Parameters, the CapabilityStatement), the scopes a call
 * needs (the enforcement point reads them with the route, common/fhir-reach.ts) and its handler.
 */
export type Operation = {
  definition: OperationDefinition & { code: string };
  handler(req: FhirRequest, env: FhirEnv, target: OperationTarget): Promise<FhirResponse>;
} & (
  | {
      internal?: false;
      /** SMART v2 scopes of one call at `target`. */
      scopes(target: OperationTarget): ScopeNeed[];
    }
  | {
      /** Plumbing reached through a route of its own (PATCH, async polling): not listed as an operation, needs the scopes of its route. */
      internal: true;
    }
);

/** The types an operation is invoked on (`Appointment` for `$book`); none at system level. */
export function resourceTypesOf(op: Operation): readonly string[] {
  return op.definition.resource ?? [];
}

/**
 * FHIR R4 operations.html: an operation that does not affect state may also be invoked with GET,
 * its parameters in the URL.
 */
export function allowsGet(op: Operation): boolean {
  return op.definition.affectsState === false;
}

/**
 * A definition written as a typed constant (`as const satisfies OperationDefinition`), copied
 * into a plain OperationDefinition (its arrays no longer read-only) for an `Operation`.
 */
export function definitionOf(constant: { readonly code: string }): OperationDefinition & { code: string } {
  return structuredClone(constant) as unknown as OperationDefinition & { code: string };
}

/** The operations one application serves (composed once, fhir/operations/index.ts). */
export class OperationRegistry {
  constructor(private readonly operations: readonly Operation[]) {
    for (const [i, op] of operations.entries()) {
      const twin = operations.slice(0, i).find((o) => o.definition.code === op.definition.code && overlaps(resourceTypesOf(o), resourceTypesOf(op)));
      if (twin) throw new Error(`two operations $${op.definition.code} on ${resourceTypesOf(op).join(', ') || 'the system'}: ${twin.definition.url} and ${op.definition.url}`);
    }
  }

  find(code: string, type?: string): Operation | undefined {
    return this.operations.find((o) => o.definition.code === code && (type ? resourceTypesOf(o).includes(type) : resourceTypesOf(o).length === 0 || o.definition.system));
  }

  list(): readonly Operation[] {
    return this.operations;
  }
}

function overlaps(a: readonly string[], b: readonly string[]): boolean {
  return (a.length === 0 && b.length === 0) || a.some((t) => b.includes(t));
}
