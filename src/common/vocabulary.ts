/**
 * The FHIR vocabulary the server and its clients both write and read: extension URLs, code and
 * identifier systems and ISiK profile canonicals. Each is defined here once, so a client that
 * builds a Schedule and the server that reads it cannot drift apart.
 */

/**
 * Schedule extension, `valueCode` `manual`: `$book` on this calendar answers 202 with a `pending`
 * appointment that the practice confirms, instead of `booked` (this server's own extension).
 */
export const BOOKING_CONFIRMATION_URL = 'http://terminus.local/fhir/StructureDefinition/booking-confirmation';

/**
 * Extension on the `status` parameter of a `query-status` answer (Parameters itself takes no
 * extensions in R4), `valueInstant`: the time of the last successful delivery (this server's own).
 */
export const LAST_DELIVERY_URL = 'http://terminus.local/fhir/StructureDefinition/subscription-last-delivery';

/** R5 `Schedule.name` carried into R4 as a cross-version extension (FHIR R5, Schedule.name). */
export const SCHEDULE_NAME_URL = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name';

/** R5 `Appointment.replaces` as a cross-version extension (ISiK 6.0.0 $book): the appointment a rescheduling replaces. */
export const REPLACES_URL = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces';

/** Identifier system of the statutory health insurance number (KVNR, 10 characters). */
export const KVID_SYSTEM = 'http://fhir.de/sid/gkv/kvid-10';

/** HL7 service-type, the code system of `serviceType` in the ISiK Terminplanung examples. */
export const SERVICE_TYPE_SYSTEM = 'http://terminology.hl7.org/CodeSystem/service-type';

const ISIK_SD = 'https://gematik.de/fhir/isik/StructureDefinition/';

/** ISiK profile canonicals (ISiK Terminplanung 6.0.0; ISiKPatient from ISiK Basis). */
export const ISIK_PROFILE = {
  Appointment: `${ISIK_SD}ISiKTermin`,
  Schedule: `${ISIK_SD}ISiKKalender`,
  Slot: `${ISIK_SD}ISiKTerminblock`,
  HealthcareService: `${ISIK_SD}ISiKMedizinischeBehandlungseinheit`,
  Patient: `${ISIK_SD}ISiKPatient`,
  Subscription: `${ISIK_SD}ISiKSubscriptionTermin`,
} as const;

/** Identifier system of a Telematik-ID (gematik: an institution's or professional's TI identity). */
export const TELEMATIK_ID_SYSTEM = 'https://gematik.de/fhir/sid/telematik-id';
