/**
 * The caller: who asks for a read or a write. Set by the enforcement point from the access token,
 * read by the FHIR layer, the booking and the store's visibility rule (server-lib/owner.ts); absent
 * when the repository itself asks (imports, jobs without a requester). A part that needs fewer
 * fields takes a `Pick<Caller, ...>`.
 */
export interface Caller {
  /** Telematik-ID of the institution (subject of the access token). */
  institution: string;
  professionOid?: string;
  clientId?: string;
  /** SMART v2 scopes granted (`system/Appointment.crus`, ...). */
  scopes: string[];
  /**
   * One of the repository owners (REPOSITORY_OWNERS): sees and manages everything, and the
   * booking treats it as the repository itself (may confirm, decline and manage calendars).
   */
  isOwner: boolean;
  /**
   * A patient (docs/requirements.md, Patients (authorization code flow)): their insurance number (KVNR). `institution` is then
   * `patientOwner(kvnr)`, the owner of what they book; their scopes are `patient/` scopes.
   */
  patient?: string;
}

/** The owner key of what a patient books: never a Telematik-ID (those have no colon) nor a workload (`issuer#sub`). */
export function patientOwner(kvnr: string): string {
  return `kvnr:${kvnr}`;
}

/** The SMART context the caller's scopes are in: `patient/` for a patient, else `system/`. */
export function scopeContextOf(identity: Pick<Caller, 'patient'>): 'system' | 'patient' {
  return identity.patient === undefined ? 'system' : 'patient';
}
