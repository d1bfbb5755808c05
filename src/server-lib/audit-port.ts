/**
 * What the guard tells the audit trail (src/audit/) and what the audit trail asks of the guard,
 * as plain data: the guard knows no AuditEvent, the audit trail no access token.
 */

/** Who acted: the person or institution (from the access token) and the client software. */
export interface AuditParties {
  user?: { identifier: { system: string; value: string }; name?: string; professionOid?: string };
  client?: { clientId: string; product?: string; version?: string; attestation?: string };
  /** The caller's network address as the server saw it (TRUST_PROXY applied). */
  address?: string;
}

export type SecurityEventCode =
  | 'client-registered'
  | 'registration-refused'
  | 'token-issued'
  | 'token-refused'
  | 'refresh-token-reuse'
  | 'token-revoked'
  | 'email-code-failed'
  | 'attestation-failed';

/** A security event of the authorization server. */
export interface SecurityEvent {
  code: SecurityEventCode;
  parties: AuditParties;
  /** For a refusal: the wire error and its description; never a token, proof, code or key. */
  failure?: string;
  requestId?: string;
}

/** A request the enforcement point refused before the FHIR layer saw it. */
export interface RefusedRequest {
  method: string;
  /** Path and query below the server root (`/fhir/Slot?x=1`). */
  url: string;
  status: number;
  /** The guard's error code and description. */
  failure: string;
  parties: AuditParties;
  requestId?: string;
}

/** The guard's side of the audit trail: events it reports. Resolves once stored (AUDIT_MODE=sync). */
export interface SecurityAudit {
  security(event: SecurityEvent): Promise<void>;
  refused(request: RefusedRequest): Promise<void>;
}

/** Signs and checks the audit trail's checkpoints with the guard's key (JWS compact, ES256). */
export interface AuditSigner {
  /** Loads the key it signs with now, so that `sign` inside a transaction needs nothing more from the store. */
  ready(): Promise<void>;
  sign(payload: Record<string, unknown>): Promise<string>;
  /** The payload of a checkpoint this guard signed; throws when the signature or key is not the guard's. */
  verify(jws: string): Promise<Record<string, unknown>>;
}
