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
  const str = (v: unknown) => typeof v === 'string';
  const optional = (v: unknown) => v === undefined || str(v);
  const recorded = str(o.recorded) ? new Date(o.recorded as string) : undefined;
  if (!str(o.id) || !recorded || Number.isNaN(recorded.getTime()) || (o.kind !== 'rest' && o.kind !== 'security') || !str(o.subtype) || !str(o.action) || !str(o.outcome) || !str(o.source)) return undefined;
  if (!validParties(o.parties) || !Array.isArray(o.entities) || !o.entities.every(str)) return undefined;
  if (![o.operation, o.outcomeDesc, o.patient, o.query, o.requestId, o.traceId].every(optional)) return undefined;
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

/** Parties as `recordJson` writes them: every field a string where there is one. */
function validParties(value: unknown): value is AuditParties {
  if (!value || typeof value !== 'object') return false;
  const { user, client, address } = value as { user?: unknown; client?: unknown; address?: unknown };
  const optional = (v: unknown) => v === undefined || typeof v === 'string';
  const object = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object';
  if (user !== undefined) {
    if (!object(user) || !object(user.identifier) || typeof user.identifier.system !== 'string' || typeof user.identifier.value !== 'string') return false;
    if (!optional(user.name) || !optional(user.professionOid)) return false;
  }
  if (client !== undefined && (!object(client) || typeof client.clientId !== 'string' || !optional(client.product) || !optional(client.version) || !optional(client.attestation))) return false;
  return optional(address);
}

/** The AuditEvent a stored text stands for; throws when the text is neither form. */
export function storedEvent(text: string): AuditEvent {
  if (text.startsWith(VERSION_1)) {
    const record = parseRecord(text);
    if (!record) throw new Error('the stored audit record is not one');
    return auditEvent(record);
  }
  return JSON.parse(text) as AuditEvent;
}

/** The AuditEvent's JSON (an export's NDJSON line) of a stored text. */
export function storedEventJson(text: string): string {
  if (!text.startsWith(VERSION_1)) return text;
  const record = parseRecord(text);
  if (!record) throw new Error('the stored audit record is not one');
  return auditEventJson(record);
}
