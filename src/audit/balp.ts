import type { AuditEvent, AuditEventAgent, AuditEventEntity, Coding } from '@medplum/fhirtypes';
import type { AuditParties, SecurityEventCode } from '../server-lib/audit-port';

export type { AuditParties, SecurityEventCode } from '../server-lib/audit-port';

/**
 * IHE Basic Audit Log Patterns (BALP, FHIR R4, https://profiles.ihe.net/ITI/BALP): the codes an
 * AuditEvent of this server carries. RESTful interactions follow the `IHE.BasicAudit.*` profiles
 * (Create, Read, Update, Delete, Query and their Patient variants); the guard's security events
 * follow FHIR core's login example and BALP's security-alert pattern.
 */
export const BALP = {
  profile: (id: string) => `https://profiles.ihe.net/ITI/BALP/StructureDefinition/${id}`,
  auditEventType: 'http://terminology.hl7.org/CodeSystem/audit-event-type',
  restfulInteraction: 'http://hl7.org/fhir/restful-interaction',
  dcm: 'http://dicom.nema.org/resources/ontology/DCM',
  participationType: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType',
  entityType: 'http://terminology.hl7.org/CodeSystem/audit-entity-type',
  objectRole: 'http://terminology.hl7.org/CodeSystem/object-role',
  sourceType: 'http://terminology.hl7.org/CodeSystem/security-source-type',
  basicAuditEntityType: 'https://profiles.ihe.net/ITI/BALP/CodeSystem/BasicAuditEntityType',
} as const;

/** This server's security event subtypes (no BALP profile names them). */
export const SECURITY_EVENT_SYSTEM = 'http://terminus.local/fhir/CodeSystem/security-event';
/** The identifier system of an OAuth client's `client_id` (RFC 7591, Dynamic Client Registration). */
export const CLIENT_ID_SYSTEM = 'urn:ietf:rfc:7591';
/** The identifier system of a W3C Trace Context trace id. */
export const TRACE_ID_SYSTEM = 'https://www.w3.org/TR/trace-context/#trace-id';
/** Profession OIDs (gemSpec_OID, the `professionOID` of an SMC-B or HBA). */
export const PROFESSION_OID_SYSTEM = 'urn:oid:1.2.276.0.76.4';

export type AuditAction = 'C' | 'R' | 'U' | 'D' | 'E';
/** R4 AuditEvent.outcome: 0 success, 4 minor failure (the client's), 8 serious failure (the server's). */
export type AuditOutcome = '0' | '4' | '8';

/** What one AuditEvent says, before it becomes FHIR. */
export interface AuditRecord {
  id: string;
  recorded: Date;
  /** A RESTful interaction (`rest`) or a security event of the guard. */
  kind: 'rest' | 'security';
  /** restful-interaction code (`read`, `search-type`, `operation`...) or a SecurityEventCode. */
  subtype: string;
  /** The operation's name without `$`, for `operation`. */
  operation?: string;
  action: AuditAction;
  outcome: AuditOutcome;
  /** Why it failed (status and the error's code and text); never a token or a body. */
  outcomeDesc?: string;
  parties: AuditParties;
  /** The resources touched (`Type/id` or `Type/id/_history/v`). */
  entities: string[];
  /** `Patient/id`: the one patient this event is about (BALP Patient variants). */
  patient?: string;
  /** A query's request line (method and URL below the server root), BALP query entity. */
  query?: string;
  requestId?: string;
  traceId?: string;
  /** This instance (`source.observer`). */
  source: string;
}

// DICOM (DCM): 110113 Security Alert, 110114 User Authentication, 110122 Login, 110123 Logout,
// 110152 Destination Role ID, 110153 Source Role ID.
const SECURITY_TYPES: Record<SecurityEventCode, { type: Coding; dcmSubtype?: Coding }> = {
  'client-registered': { type: dcm('110114') },
  'registration-refused': { type: dcm('110113') },
  'token-issued': { type: dcm('110114'), dcmSubtype: dcm('110122') },
  'token-refused': { type: dcm('110114'), dcmSubtype: dcm('110122') },
  'refresh-token-reuse': { type: dcm('110113') },
  'token-revoked': { type: dcm('110114'), dcmSubtype: dcm('110123') },
  'email-code-failed': { type: dcm('110113') },
  'attestation-failed': { type: dcm('110113') },
};

const REST_PROFILE: Record<AuditAction, string> = { C: 'Create', R: 'Read', U: 'Update', D: 'Delete', E: 'Query' };

/** The AuditEvent a record stands for; its JSON is what the chain hashes (keys in this order). */
export function auditEvent(r: AuditRecord): AuditEvent {
  const security = r.kind === 'security' ? SECURITY_TYPES[r.subtype as SecurityEventCode] : undefined;
  const profile = security ? undefined : BALP.profile(`IHE.BasicAudit.${r.patient ? 'Patient' : ''}${REST_PROFILE[r.action]}`);
  const subtype: Coding[] = security
    ? [{ system: SECURITY_EVENT_SYSTEM, code: r.subtype }, ...(security.dcmSubtype ? [security.dcmSubtype] : [])]
    : [{ system: BALP.restfulInteraction, code: r.subtype }];
  if (r.operation) subtype.push({ system: BALP.restfulInteraction, code: 'operation', display: `$${r.operation}` });
  return {
    resourceType: 'AuditEvent',
    id: r.id,
    ...(profile ? { meta: { profile: [profile] } } : {}),
    type: security?.type ?? { system: BALP.auditEventType, code: 'rest' },
    subtype,
    action: r.action,
    recorded: r.recorded.toISOString(),
    outcome: r.outcome,
    ...(r.outcomeDesc ? { outcomeDesc: r.outcomeDesc } : {}),
    agent: agents(r),
    source: { observer: { display: r.source }, type: [{ system: BALP.sourceType, code: '4' }] },
    entity: entities(r),
  };
}

/**
 * BALP's agents: the client (Source Role ID for a write or query, Destination for a read), the
 * server, and the user (IRCP, the requestor). Names and the profession come from the card.
 */
function agents(r: AuditRecord): AuditEventAgent[] {
  const reading = r.action === 'R';
  const out: AuditEventAgent[] = [];
  const { client, user, address } = r.parties;
  out.push({
    type: { coding: [dcm(reading ? '110152' : '110153')] },
    ...(client
      ? { who: { identifier: { system: CLIENT_ID_SYSTEM, value: client.clientId }, ...(client.product ? { display: [client.product, client.version].filter(Boolean).join(' ') } : {}) } }
      : {}),
    requestor: false,
    ...(address ? { network: { address, type: '2' as const } } : {}),
    ...(client?.attestation ? { policy: [`attestation:${client.attestation}`] } : {}),
  });
  out.push({
    type: { coding: [dcm(reading ? '110153' : '110152')] },
    who: { display: r.source },
    requestor: false,
  });
  if (user) {
    out.push({
      type: { coding: [{ system: BALP.participationType, code: 'IRCP' }] },
      who: { identifier: user.identifier },
      ...(user.name ? { name: user.name } : {}),
      ...(user.professionOid ? { role: [{ coding: [{ system: PROFESSION_OID_SYSTEM, code: user.professionOid }] }] } : {}),
      requestor: true,
    });
  }
  return out;
}

function entities(r: AuditRecord): AuditEventEntity[] {
  const out: AuditEventEntity[] = [];
  for (const reference of r.entities) {
    out.push({ what: { reference }, type: { system: BALP.entityType, code: '2' }, role: { system: BALP.objectRole, code: '4' } });
  }
  if (r.patient) out.push({ what: { reference: r.patient }, type: { system: BALP.entityType, code: '1' }, role: { system: BALP.objectRole, code: '1' } });
  if (r.query !== undefined) {
    const query = redacted(r.query);
    // BALP's query entity carries the request line as base64 only (no plain copy: the record stays small).
    out.push({ type: { system: BALP.entityType, code: '2' }, role: { system: BALP.objectRole, code: '24' }, query: Buffer.from(query, 'utf8').toString('base64') });
  }
  if (r.requestId) out.push({ what: { identifier: { value: r.requestId } }, type: { system: BALP.basicAuditEntityType, code: 'XrequestId' } });
  if (r.traceId) out.push({ what: { identifier: { system: TRACE_ID_SYSTEM, value: r.traceId } }, type: { system: BALP.basicAuditEntityType, code: 'XrequestId' } });
  return out;
}

/** Query parameters that may carry a credential (RFC 6750 §2.3 `access_token`, and the like): their values never reach the trail. */
const SECRET_PARAMS = /^(access_token|refresh_token|id_token|code|code_verifier|client_assertion|subject_token|actor_token|dpop)$/i;

/** A request line with the values of credential parameters replaced by `[redacted]`. */
export function redacted(requestLine: string): string {
  const q = requestLine.indexOf('?');
  if (q < 0) return requestLine;
  const params = new URLSearchParams(requestLine.slice(q + 1));
  let changed = false;
  for (const name of new Set(params.keys())) {
    if (SECRET_PARAMS.test(name)) {
      params.set(name, '[redacted]');
      changed = true;
    }
  }
  return changed ? `${requestLine.slice(0, q)}?${params.toString()}` : requestLine;
}

/** A DICOM code (AuditEvents carry codes without display texts, to stay small). */
function dcm(code: string): Coding {
  return { system: BALP.dcm, code };
}
