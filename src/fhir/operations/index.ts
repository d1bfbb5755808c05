import { asyncStatusOperation } from './async';
import { bookOperation } from './book';
import { patchOperation } from './patch';
import { OperationRegistry, type Operation } from './registry';
import { statusOperation } from './subscription-status';
import { eventsOperation } from './subscription-events';

export { fhirRequestJob, FHIR_REQUEST_JOB } from './async';
export { allowsGet, definitionOf, OperationRegistry, resourceTypesOf, type Operation, type OperationTarget } from './registry';
export { parseInputParameters, type InputParameters } from './parameters';

/**
 * The operations this server offers: ISiK `$book`, PATCH, async polling, the backport's `$status`
 * and `$events`; then `extra` ones an application is composed with (fhir/router.ts `fhirEnv`).
 * A new operation is one module exporting its `Operation`, listed here.
 */
export function fhirOperations(extra: readonly Operation[] = []): OperationRegistry {
  return new OperationRegistry([bookOperation, patchOperation, asyncStatusOperation, statusOperation, eventsOperation, ...extra]);
}
