import type { Appointment } from '@medplum/fhirtypes';

/** Appointment states that occupy their slots and time window. */
const HOLDING = new Set(['booked', 'pending', 'arrived', 'checked-in']);

export const holdsTime = (a: Appointment | undefined): boolean => !!a && HOLDING.has(a.status);

/** A Schedule with this extension books as `pending` (202): the practice confirms each booking. */
export const BOOKING_CONFIRMATION_URL = 'http://terminus.local/fhir/StructureDefinition/booking-confirmation';

/** ISiK 6.0.0 $book: the new appointment of a rescheduling points to the one it replaces. */
export const REPLACES_URL = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces';

export const EXTERNAL_TAG = { system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' } as const;
