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

/** The operations one application serves (composed once, fhir/operations/index.ts). */
export class OperationRegistry {
  constructor(private readonly operations: readonly Operation[]) {}

  find(code: string, type?: string): Operation | undefined {
    return this.operations.find((o) => o.definition.code === code && (type ? o.resourceTypes.includes(type) : o.resourceTypes.length === 0 || o.definition.system));
  }

  list(): readonly Operation[] {
    return this.operations;
  }
}
