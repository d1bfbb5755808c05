import { isFhirId } from '../server-lib/fhir-id';
import { referencedId } from '../server-lib/references';

/**
 * The ISiK `cancelled-appt-id` parameter of $book holds an id, `Appointment/id` or an absolute
 * URL on the FHIR base.
 */
export function appointmentIdOf(value: string): string | undefined {
  const trimmed = value.trim();
  return isFhirId(trimmed) ? trimmed : referencedId(trimmed, 'Appointment');
}
