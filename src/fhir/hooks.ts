import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { Repository } from '../store';
import type { FhirRequest } from './request';

export interface WriteEvent {
  interaction: 'create' | 'update' | 'patch' | 'delete';
  type: string;
  /** The resource about to be stored (absent for delete). */
  resource?: Resource;
  /** The current version, when there is one. */
  previous?: Resource;
  req: FhirRequest;
  /** Bound to the write's transaction: extra writes commit or roll back with it. */
  repo: Repository;
  /**
   * The application context of the FHIR layer (configuration, key material) for hooks that need
   * it (subscriptions: the https rule of production, sealing channel headers). Set on REST and
   * PATCH writes; absent on writes the booking domain cascades.
   */
  ctx?: AppContext;
}

/**
 * Domain rules that must hold for every write of a type, whatever the route (REST, transaction
 * Bundle, import): booking keeps its reservation table in step with Appointments, subscriptions
 * record outbox events. A hook may throw an OperationOutcomeError to refuse the write.
 */
export type WriteHook = (event: WriteEvent) => Promise<void>;

const hooks = new Map<string, WriteHook[]>();

export function registerWriteHook(type: string, hook: WriteHook): void {
  hooks.set(type, [...(hooks.get(type) ?? []), hook]);
}

export async function runWriteHooks(event: WriteEvent): Promise<void> {
  for (const hook of hooks.get(event.type) ?? []) await hook(event);
}
