import type { OperationDefinition } from '@medplum/fhirtypes';
import type { FhirEnv, FhirRequest, FhirResponse } from '../request';

/** A FHIR operation: its definition (drives the CapabilityStatement) and its handler. */
export interface Operation {
  definition: OperationDefinition & { code: string };
  /** Resource types it is invoked on (`Appointment/$book`); empty for system level. */
  resourceTypes: string[];
  /** Answers GET too (operations without side effects). */
  allowGet?: boolean;
  /** Plumbing reached through a route of its own (patch, async polling): not listed as an operation. */
  internal?: boolean;
  handler(req: FhirRequest, env: FhirEnv, target: { type?: string; id?: string }): Promise<FhirResponse>;
}

const operations: Operation[] = [];

/** Parts register their operations at load time (booking: $book; subscriptions: $status, $events). */
export function registerOperation(op: Operation): void {
  const existing = operations.findIndex((o) => o.definition.code === op.definition.code && sameTypes(o.resourceTypes, op.resourceTypes));
  if (existing >= 0) operations.splice(existing, 1);
  operations.push(op);
}

export function findOperation(code: string, type?: string): Operation | undefined {
  return operations.find((o) => o.definition.code === code && (type ? o.resourceTypes.includes(type) : o.resourceTypes.length === 0 || o.definition.system));
}

export function listOperations(): readonly Operation[] {
  return operations;
}

function sameTypes(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((t) => b.includes(t));
}
