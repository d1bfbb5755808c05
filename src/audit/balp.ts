import type { AuditEvent, AuditEventAgent, AuditEventEntity, Coding } from '@medplum/fhirtypes';
import type { AuditParties, SecurityEventCode } from '../server-lib/audit-port';
import type { AuditColumns } from './chain';

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

/** A part of every name of SECRET_PARAMS, or an escape that could spell one. */
const MAYBE_SECRET = /token|code|assertion|dpop|%/i;

/** A request line with the values of credential parameters replaced by `[redacted]`. */
export function redacted(requestLine: string): string {
  const q = requestLine.indexOf('?');
  if (q < 0) return requestLine;
  // No name of SECRET_PARAMS in it, not even %-encoded: nothing to parse.
  if (!MAYBE_SECRET.test(requestLine.slice(q + 1))) return requestLine;
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

const q = JSON.stringify;
/** A Coding as JSON.stringify writes it; the constant ones below serialised once. */
const coding = (system: string, code: string) => `{"system":${q(system)},"code":${q(code)}}`;
const REST_TYPE = coding(BALP.auditEventType, 'rest');
const SOURCE_TYPE = `"type":[${coding(BALP.sourceType, '4')}]`;
const ENTITY_TYPE_2 = `"type":${coding(BALP.entityType, '2')}`;
const REQUEST_ID_TYPE = `"type":${coding(BALP.basicAuditEntityType, 'XrequestId')}`;
const ROLE_4 = `"role":${coding(BALP.objectRole, '4')}`;
const PATIENT_TYPE_ROLE = `"type":${coding(BALP.entityType, '1')},"role":${coding(BALP.objectRole, '1')}`;
const QUERY_TYPE_ROLE = `${ENTITY_TYPE_2},"role":${coding(BALP.objectRole, '24')}`;
const CLIENT_AGENT = (code: string) => `{"type":{"coding":[${coding(BALP.dcm, code)}]},`;
const AGENT_SOURCE_ROLE = CLIENT_AGENT('110153');
const AGENT_DESTINATION_ROLE = CLIENT_AGENT('110152');
const USER_AGENT = `,{"type":{"coding":[${coding(BALP.participationType, 'IRCP')}]},"who":{`;
const CLIENT_ID = `"who":{"identifier":{"system":${q(CLIENT_ID_SYSTEM)}`;
const REST_SUBTYPE = `"subtype":[{"system":${q(BALP.restfulInteraction)}`;
const SECURITY_SUBTYPE = `"subtype":[{"system":${q(SECURITY_EVENT_SYSTEM)}`;
const OPERATION_SUBTYPE = `,{"system":${q(BALP.restfulInteraction)},"code":"operation","display":`;
const TRACE_ID = `{"what":{"identifier":{"system":${q(TRACE_ID_SYSTEM)},"value":`;
const PROFILE_META = new Map(
  (['', 'Patient'] as const).flatMap((variant) => Object.entries(REST_PROFILE).map(([action, name]) => [`${variant}${action}`, `"meta":{"profile":[${q(BALP.profile(`IHE.BasicAudit.${variant}${name}`))}]},`] as const)),
);

/**
 * `JSON.stringify(auditEvent(r))`, the same text built without the object in between: an
 * AuditEvent is stored for every access, so its constant parts are serialised once. test/audit
 * holds the two to the same text.
 */
export function auditEventJson(r: AuditRecord): string {
  const security = r.kind === 'security' ? SECURITY_TYPES[r.subtype as SecurityEventCode] : undefined;
  let s = `{"resourceType":"AuditEvent"${field('id', r.id)},`;
  if (!security) {
    const variant = `${r.patient ? 'Patient' : ''}${r.action}`;
    s += PROFILE_META.get(variant) ?? `"meta":{"profile":[${q(BALP.profile(`IHE.BasicAudit.${r.patient ? 'Patient' : ''}${REST_PROFILE[r.action]}`))}]},`;
  }
  s += `"type":${security ? q(security.type) : REST_TYPE},${security ? SECURITY_SUBTYPE : REST_SUBTYPE}${field('code', r.subtype)}}`;
  if (security?.dcmSubtype) s += `,${q(security.dcmSubtype)}`;
  if (r.operation) s += `${OPERATION_SUBTYPE}${q(`$${r.operation}`)}}`;
  s += `]${field('action', r.action)},"recorded":"${r.recorded.toISOString()}"${field('outcome', r.outcome)}`;
  if (r.outcomeDesc) s += `,"outcomeDesc":${q(r.outcomeDesc)}`;
  const source = r.source === undefined ? '' : `"display":${q(r.source)}`;
  s += `,"agent":[${agentsJson(r, source)}],"source":{"observer":{${source}},${SOURCE_TYPE}},"entity":[${entitiesJson(r)}]}`;
  return s;
}

/** `,"key":value`, nothing for undefined (JSON.stringify leaves such a key out). */
function field(key: string, value: unknown): string {
  return value === undefined ? '' : `,"${key}":${q(value)}`;
}

function agentsJson(r: AuditRecord, source: string): string {
  const reading = r.action === 'R';
  const { client, user, address } = r.parties;
  let s = reading ? AGENT_DESTINATION_ROLE : AGENT_SOURCE_ROLE;
  if (client) {
    s += `${CLIENT_ID}${field('value', client.clientId)}}`;
    if (client.product) s += `,"display":${q(client.version ? `${client.product} ${client.version}` : client.product)}`;
    s += '},';
  }
  s += '"requestor":false';
  if (address) s += `,"network":{"address":${q(address)},"type":"2"}`;
  if (client?.attestation) s += `,"policy":[${q(`attestation:${client.attestation}`)}]`;
  s += `},${reading ? AGENT_SOURCE_ROLE : AGENT_DESTINATION_ROLE}"who":{${source}},"requestor":false}`;
  if (user) {
    s += `${USER_AGENT}${field('identifier', user.identifier).slice(1)}}`;
    if (user.name) s += `,"name":${q(user.name)}`;
    if (user.professionOid) s += `,"role":[{"coding":[${coding(PROFESSION_OID_SYSTEM, user.professionOid)}]}]`;
    s += ',"requestor":true}';
  }
  return s;
}

function entitiesJson(r: AuditRecord): string {
  let s = '';
  for (const reference of r.entities) s += `,{"what":{${field('reference', reference).slice(1)}},${ENTITY_TYPE_2},${ROLE_4}}`;
  if (r.patient) s += `,{"what":{"reference":${q(r.patient)}},${PATIENT_TYPE_ROLE}}`;
  if (r.query !== undefined) s += `,{${QUERY_TYPE_ROLE},"query":"${Buffer.from(redacted(r.query), 'utf8').toString('base64')}"}`;
  if (r.requestId) s += `,{"what":{"identifier":{"value":${q(r.requestId)}}},${REQUEST_ID_TYPE}}`;
  if (r.traceId) s += `,${TRACE_ID}${q(r.traceId)}}},${REQUEST_ID_TYPE}}`;
  return s.slice(1);
}

/**
 * `auditColumns(auditEvent(r))`, read off the record (an event's search columns are derived
 * from its JSON; verify derives them again from the stored text). test/audit holds the two equal.
 */
export function recordColumns(r: AuditRecord): AuditColumns {
  const security = r.kind === 'security' ? SECURITY_TYPES[r.subtype as SecurityEventCode] : undefined;
  const agents = new Set<string>();
  if (r.parties.client) addIdentifier(agents, CLIENT_ID_SYSTEM, r.parties.client.clientId);
  if (r.parties.user) addIdentifier(agents, r.parties.user.identifier?.system, r.parties.user.identifier?.value);
  const entities = new Set<string>();
  const patients = new Set<string>();
  for (const reference of r.entities) {
    const ref = reference.replace(/\/_history\/[^/]+$/, '');
    if (ref) entities.add(ref);
  }
  if (r.patient) {
    const ref = r.patient.replace(/\/_history\/[^/]+$/, '');
    if (ref.startsWith('Patient/')) patients.add(ref);
    else if (ref) entities.add(ref);
  }
  const subtypes = [r.subtype, security?.dcmSubtype?.code, r.operation ? 'operation' : undefined].filter((c): c is string => !!c);
  return {
    type: (security ? security.type.code : 'rest') ?? '',
    subtypes,
    action: r.action ?? null,
    outcome: r.outcome ?? '0',
    agents: agents.size > 1 ? [...agents].sort() : [...agents],
    entities: entities.size > 1 ? [...entities].sort() : [...entities],
    patients: patients.size > 1 ? [...patients].sort() : [...patients],
  };
}

/** An agent's identifier as auditColumns reads it: `value` and `system|value`. */
function addIdentifier(agents: Set<string>, system: string | undefined, value: string | undefined): void {
  if (!value) return;
  agents.add(value);
  if (system) agents.add(`${system}|${value}`);
}
