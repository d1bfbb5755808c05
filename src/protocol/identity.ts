/**
 * The verified caller of a FHIR request: set by the enforcement point from the access token, read
 * by the FHIR layer; absent when the repository itself asks (imports, jobs without a requester).
 */
export interface RequestIdentity {
  /** Telematik-ID of the institution (subject of the access token). */
  institution: string;
  professionOid?: string;
  clientId?: string;
  /** SMART v2 scopes granted (`system/Appointment.crus`, ...). */
  scopes: string[];
  /** Repository owners (REPOSITORY_OWNERS) see and manage everything. */
  isOwner: boolean;
}
