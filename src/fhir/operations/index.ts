import { asyncStatusOperation } from './async';
import { bookOperation } from './book';
import { patchOperation } from './patch';
import { OperationRegistry } from './registry';
import { statusOperation } from './subscription-status';
import { eventsOperation } from './subscription-events';

export { fhirRequestJob, FHIR_REQUEST_JOB } from './async';
export { OperationRegistry, type Operation } from './registry';

/** The operations this server offers: ISiK `$book`, PATCH, async polling, the backport's `$status` and `$events`. */
export function fhirOperations(): OperationRegistry {
  return new OperationRegistry([bookOperation, patchOperation, asyncStatusOperation, statusOperation, eventsOperation]);
}
