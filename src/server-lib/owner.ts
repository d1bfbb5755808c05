import type { Resource } from '@medplum/fhirtypes';
import { KVID_SYSTEM } from '../common/vocabulary';
import type { Caller } from '../common/identity';

/**
 * What a patient sees of what belongs to nobody: calendars, slots, services, practitioners,
 * places and code systems. Never another person's data (Appointments, Patients, related persons,
 * answers, encounters, subscriptions), not even the repository's own.
 */
export const PUBLIC_TO_PATIENTS: readonly string[] = ['CodeSystem', 'ValueSet', 'Schedule', 'Slot', 'HealthcareService', 'Practitioner', 'PractitionerRole', 'Location'];

/** The identifier system of the German statutory insurance number (KVNR). */
export { KVID_SYSTEM };

/** Types whose resources belong to the institution that created them. */
const INSTITUTION_OWNED = new Set(['Appointment', 'Subscription']);

/**
 * The one visibility rule of the repository. Appointments and Subscriptions belong to the
 * institution that created them; everything else, and whatever the repository writes itself,
 * belongs to nobody (`null`) and is visible to all. Repository owners (REPOSITORY_OWNERS) see
 * and manage everything. A patient (docs/requirements.md#identity-scopes-and-ownership) sees what
 * they own (their bookings), the public part of what belongs to nobody, and the Patients that
 * carry their insurance number. The store's SQL form of the rule is `scopeSql` in
 * store/search/sql.ts; it must say the same.
 *
 * Can `viewer` see `resource`, owned by `owner`? No viewer: the repository itself, which sees
 * all. For a patient the resource decides (without it only what they own).
 */
export function canSee(owner: string | null, viewer?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>, resource?: Resource): boolean {
  if (!viewer || viewer.isOwner || owner === viewer.institution) return true;
  if (viewer.patient === undefined) return owner === null;
  if (resource?.resourceType === 'Patient') return carriesInsuranceNumber(resource, viewer.patient);
  return owner === null && resource !== undefined && PUBLIC_TO_PATIENTS.includes(resource.resourceType);
}

/** A Patient with identifier `KVID_SYSTEM|kvnr`. */
export function carriesInsuranceNumber(patient: Resource, kvnr: string): boolean {
  return patient.resourceType === 'Patient' && (patient.identifier ?? []).some((i) => i.system === KVID_SYSTEM && i.value === kvnr);
}

/**
 * Owner recorded when a resource is created. Appointments and Subscriptions always belong to the
 * creating institution, also when it is a repository owner (owners see all of them anyway, other
 * institutions see none). Anything else a repository owner writes (calendars, services, code
 * systems) belongs to the repository (`null`); the repository itself (imports, jobs without a
 * requester) writes `null` too.
 */
export function ownerForWrite(type: string, writer: Pick<Caller, 'institution' | 'isOwner'> | undefined): string | null {
  if (!writer?.institution) return null;
  return writer.isOwner && !INSTITUTION_OWNED.has(type) ? null : writer.institution;
}
