/**
 * The access guard: discovery and the authorization server under /svc/v{major} (`guardRouter`),
 * the enforcement point in front of /fhir (guard/pep), and what app.ts composes them from.
 */
export { API_VERSION, API_VERSIONS, composeGuard, type GuardOptions } from './compose';
export { AttestationMethods, type AttestationMethod } from './attestation';
export { defineGrant, type Grant } from './authserver/grants';
export { guardRouter } from './router';
export { sharedState, SharedStateUnavailable, type SharedState } from './state/shared-state';
export { keyEncryptionFor } from './keys/key-encryption';
export { RevokedSessions } from './state/revoked-sessions';
export { ResourceNotFound, ServerError, TemporarilyUnavailable } from './errors';
export { sendGuardError } from './http/respond';
export { createDevPki, DevPkiExists, writeDevPki } from './pki/dev-pki';
export { cardIssuersFor, CardIssuers } from './pki/card-issuers';
export { enforcementPoint, pepSettings, upstreamProxy, type PepOptions } from './pep';
export { loadPolicyData, policyEngineReady } from './policy';
export { InvalidWorkloadRequest, issueWorkloadToken, MAX_WORKLOAD_TOKEN_TTL_SEC } from './authserver/workload/issue-workload-token';
export { SigningKeys } from './keys/signing-keys';
export { auditSigner, CheckpointKeyUnavailable } from './keys/audit-signer';
export { guardSettings } from './settings';
export { aslRequired, aslRoutes } from './asl/asl-routes';
