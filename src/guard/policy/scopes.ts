import type { PolicyData } from './types';

/**
 * docs/requirements.md, Patients (authorization code flow): what a patient gets unless POLICY_FILE names
 * `scopes.patient`. `patient/Appointment.crus` adds search to the documented `.cru`: an app lists
 * its user's appointments (the enforcement point and the store limit every answer to them).
 */
export const DEFAULT_PATIENT_SCOPES = [
  'patient/Slot.rs',
  'patient/Schedule.rs',
  'patient/HealthcareService.rs',
  'patient/Practitioner.rs',
  'patient/CodeSystem.rs',
  'patient/Appointment.crus',
  'patient/Patient.r',
  // The AuditEvents about their own data (the store shows a patient no others).
  'patient/AuditEvent.rs',
];

/** Scopes a patient may get. */
export function patientScopes(data: PolicyData): string[] {
  return [...(data.scopes.patient ?? DEFAULT_PATIENT_SCOPES)];
}

/** Scopes a requestor may get; owners (REPOSITORY_OWNERS) get the owner scopes in addition. */
export function allowedScopes(data: PolicyData, repositoryOwner: boolean): string[] {
  return repositoryOwner ? [...data.scopes.requestor, ...data.scopes.owner] : [...data.scopes.requestor];
}

/** Scopes a workload token exchange may grant: `scopes.workload`, else the requestor scopes. */
export function workloadScopes(data: PolicyData): string[] {
  return [...(data.scopes.workload ?? data.scopes.requestor)];
}
