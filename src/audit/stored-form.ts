import type { AuditEvent } from '@medplum/fhirtypes';
import type { AuditParties } from '../server-lib/audit-port';
import { auditEvent, auditEventJson, redacted, type AuditAction, type AuditOutcome, type AuditRecord } from './balp';

/**
 * How an AuditEvent is stored: the record it is rendered from, not its BALP JSON. An audited slot
 * search's AuditEvent is 2.2 KB of JSON, most of it the same systems and codes in every event; its
 * record is about 750 bytes, a third. The row, its hash and its write to the store shrink with it (below
 * PostgreSQL's 2 KB compression threshold, so no row is compressed either), and it is stored for
 * every access. The hash chain links the stored text, so an altered record breaks its link as an
 * altered AuditEvent did; reads, searches and exports render the AuditEvent from it (`balp.ts`,
 * one function for all of them).
 *
 * The text is `{"v":1,...}` with the record's fields by name; rows stored before this form hold the
 * AuditEvent's JSON itself (`{"resourceType":"AuditEvent",...}`) and are read as they are.
 */
const VERSION_1 = '{"v":1,';

/** The stored text of a record: the query already redacted, absent fields left out. */
export function recordJson(r: AuditRecord): string {
  const { client, user, address } = r.parties;
  const parties: AuditParties = {};
  if (user) parties.user = { identifier: { system: user.identifier.system, value: user.identifier.value }, name: user.name, professionOid: user.professionOid };
  if (client) parties.client = { clientId: client.clientId, product: client.product, version: client.version, attestation: client.attestation };
  if (address !== undefined) parties.address = address;
  return `${VERSION_1}${JSON.stringify({
    id: r.id,
    recorded: r.recorded.toISOString(),
    kind: r.kind,
    subtype: r.subtype,
    operation: r.operation,
    action: r.action,
    outcome: r.outcome,
    outcomeDesc: r.outcomeDesc,
    parties,
    entities: r.entities,
    patient: r.patient,
    query: r.query === undefined ? undefined : redacted(r.query),
    requestId: r.requestId,
    traceId: r.traceId,
    source: r.source,
  }).slice(1)}`;
}

/** The record a stored text holds; undefined for text that is not one (an AuditEvent of the earlier form, or altered). */
export function parseRecord(text: string): AuditRecord | undefined {
  if (!text.startsWith(VERSION_1)) return undefined;
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const recorded = isString(o.recorded) ? new Date(o.recorded as string) : undefined;
  if (!isString(o.id) || !recorded || Number.isNaN(recorded.getTime()) || (o.kind !== 'rest' && o.kind !== 'security') || !isString(o.subtype) || !isString(o.action) || !isString(o.outcome) || !isString(o.source)) return undefined;
  if (!validParties(o.parties) || !Array.isArray(o.entities) || !o.entities.every(isString)) return undefined;
  if (![o.operation, o.outcomeDesc, o.patient, o.query, o.requestId, o.traceId].every(isOptionalString)) return undefined;
  return {
    id: o.id as string,
    recorded,
    kind: o.kind,
    subtype: o.subtype as string,
    operation: o.operation as string | undefined,
    action: o.action as AuditAction,
    outcome: o.outcome as AuditOutcome,
    outcomeDesc: o.outcomeDesc as string | undefined,
    parties: o.parties as AuditParties,
    entities: o.entities as string[],
    patient: o.patient as string | undefined,
    query: o.query as string | undefined,
    requestId: o.requestId as string | undefined,
    traceId: o.traceId as string | undefined,
    source: o.source as string,
  };
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isOptionalString = (v: unknown): v is string | undefined => v === undefined || typeof v === 'string';
const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object';

/** Parties as `recordJson` writes them: every field a string where there is one. */
function validParties(value: unknown): value is AuditParties {
  if (!isObject(value)) return false;
  const { user, client, address } = value;
  if (user !== undefined) {
    if (!isObject(user) || !isObject(user.identifier) || typeof user.identifier.system !== 'string' || typeof user.identifier.value !== 'string') return false;
    if (!isOptionalString(user.name) || !isOptionalString(user.professionOid)) return false;
  }
  if (client !== undefined && (!isObject(client) || typeof client.clientId !== 'string' || !isOptionalString(client.product) || !isOptionalString(client.version) || !isOptionalString(client.attestation))) return false;
  return isOptionalString(address);
}

/** The record of a text in the record form; throws when it is not a valid one. */
function recordIn(text: string): AuditRecord {
  const record = parseRecord(text);
  if (!record) throw new Error('the stored audit record is not one');
  return record;
}

/** The AuditEvent a stored text stands for; throws when the text is neither form. */
export function storedEvent(text: string): AuditEvent {
  return text.startsWith(VERSION_1) ? auditEvent(recordIn(text)) : (JSON.parse(text) as AuditEvent);
}

/** The AuditEvent's JSON (an export's NDJSON line) of a stored text. */
export function storedEventJson(text: string): string {
  return text.startsWith(VERSION_1) ? auditEventJson(recordIn(text)) : text;
}
