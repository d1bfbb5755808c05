/**
 * The audit trail: every access to the repository and every security event of the guard as a FHIR
 * AuditEvent (IHE BALP), stored in hash chains with signed checkpoints, searchable by owners and by
 * the patient it is about. Knows the store and FHIR's AuditEvent; not HTTP, not the guard.
 */
export { AuditTrail, AuditUnavailable } from './audit-trail';
export { auditEvent, type AuditRecord, type AuditAction, type AuditOutcome } from './balp';
export { mayHoldPatients, patientsOf, patientsInBundle } from './patients';
export { currentFrame, inFrame, type RequestAudit, type InteractionFrame } from './scope';
export { readAuditEvent, searchAuditEvents, type AuditVisibility } from './search';
export { verifyAuditTrail, type VerifyResult } from './verify';
export { exportAuditEvents } from './export';
