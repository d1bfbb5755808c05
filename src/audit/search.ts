import type { AuditEvent, Bundle } from '@medplum/fhirtypes';
import type { Db } from '../store';
import { badRequest, notFound } from '../server-lib/outcomes';
import { storedEvent } from './stored-form';

/**
 * Which AuditEvents a caller may see: owners every one; a patient those about their own Patient
 * resources; anyone else none.
 */
export type AuditVisibility = { all: true } | { patients: string[] };

const DEFAULT_COUNT = 50;
const MAX_COUNT = 500;

/** Search parameters of AuditEvent this server answers (FHIR R4 AuditEvent, BALP's Audit Consumer). */
const TOKEN_COLUMNS: Record<string, string> = { type: 'type', subtype: 'subtypes', action: 'action', outcome: 'outcome' };

/**
 * Rows whose reference column (`patients`, `entities`, `agents`) holds one of `values`: the one GIN
 * index over the three columns together (migrations/501_audit_lean.sql) finds the candidates, the
 * column keeps those it names.
 */
function referenceCondition(column: 'patients' | 'entities' | 'agents', placeholder: string): string {
  return `((patients || entities || agents) && ${placeholder}::text[] AND ${column} && ${placeholder}::text[])`;
}

export async function readAuditEvent(db: Db, id: string, visibility: AuditVisibility): Promise<AuditEvent> {
  if (!isUuid(id)) throw notFound('AuditEvent', id);
  const { rows } = await db.query<{ content: string; patients: string[] }>('SELECT content, patients FROM audit_event WHERE id = $1', [id]);
  const row = rows[0];
  if (!row || !visible(row.patients, visibility)) throw notFound('AuditEvent', id);
  return storedEvent(row.content);
}

/**
 * A page of AuditEvents, newest first unless `_sort=date`. Pages continue from a cursor (the
 * last event's time and id), so events recorded meanwhile never shift a page.
 */
export async function searchAuditEvents(db: Db, query: [string, string][], visibility: AuditVisibility, links: { self: string; base: string }): Promise<Bundle> {
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  let count = DEFAULT_COUNT;
  let ascending = false;
  let cursor: { recorded: string; id: string } | undefined;
  const kept: [string, string][] = [];
  for (const [rawName, value] of query) {
    const [name, modifier] = rawName.split(':');
    if (name === '_format' || name === '_pretty') continue;
    if (name !== '_cursor') kept.push([rawName, value]);
    if (name === '_count') {
      count = Number(value);
      if (!/^\d+$/.test(value) || count < 1) throw badRequest(`_count must be a positive integer, got "${value}"`, '_count');
      count = Math.min(count, MAX_COUNT);
    } else if (name === '_sort') {
      if (value !== '-date' && value !== 'date') throw badRequest(`_sort: AuditEvent sorts by date or -date only, got "${value}"`, '_sort');
      ascending = value === 'date';
    } else if (name === '_cursor') {
      cursor = decodeCursor(value);
    } else if (name === 'date') {
      where.push(dateCondition(value, param));
    } else if (name === 'agent') {
      const values = value.split(',').map((v) => (modifier === 'identifier' ? v.replace(/^\|/, '') : localReference(v, links.base)));
      if (modifier !== undefined && modifier !== 'identifier') throw badRequest(`agent supports the :identifier modifier only, got :${modifier}`, 'agent');
      where.push(referenceCondition('agents', param(values)));
    } else if (name === 'entity') {
      where.push(referenceCondition('entities', param(value.split(',').map((v) => localReference(v, links.base).replace(/\/_history\/[^/]+$/, '')))));
    } else if (name === 'patient') {
      where.push(referenceCondition('patients', param(value.split(',').map((v) => patientReference(v, links.base)))));
    } else if (TOKEN_COLUMNS[name] && modifier === undefined) {
      const codes = value.split(',').map((v) => v.slice(v.indexOf('|') + 1));
      const column = TOKEN_COLUMNS[name];
      where.push(column === 'subtypes' ? `subtypes && ${param(codes)}::text[]` : `${column} = ANY(${param(codes)}::text[])`);
    } else {
      throw badRequest(`AuditEvent has no search parameter "${rawName}" here (date, agent, agent:identifier, entity, patient, type, subtype, action, outcome, _count, _sort)`, rawName);
    }
  }
  if ('patients' in visibility) where.push(referenceCondition('patients', param(visibility.patients)));
  if (cursor) where.push(`(recorded, id) ${ascending ? '>' : '<'} (${param(cursor.recorded)}::timestamptz, ${param(cursor.id)}::uuid)`);
  const order = ascending ? 'recorded ASC, id ASC' : 'recorded DESC, id DESC';
  const { rows } = await db.query<{ id: string; recorded: Date; content: string }>(
    `SELECT id, recorded, content FROM audit_event ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${count + 1}`,
    params,
  );
  const page = rows.slice(0, count);
  const link = [{ relation: 'self', url: links.self }];
  if (rows.length > count) {
    const last = page[page.length - 1];
    const next = new URLSearchParams([...kept, ['_cursor', encodeCursor(last.recorded, last.id)]]);
    link.push({ relation: 'next', url: `${links.base}/AuditEvent?${next.toString()}` });
  }
  return {
    resourceType: 'Bundle',
    type: 'searchset',
    link,
    entry: page.map((r) => ({ fullUrl: `${links.base}/AuditEvent/${r.id}`, resource: storedEvent(r.content), search: { mode: 'match' as const } })),
  };
}

function visible(patients: string[], visibility: AuditVisibility): boolean {
  return 'all' in visibility || patients.some((p) => visibility.patients.includes(p));
}

/** `ge2026-11-01`, `lt2026-11-28T10:00:00Z`: a prefix and a date of any precision, as FHIR date search. */
function dateCondition(value: string, param: (v: unknown) => string): string {
  const m = /^(eq|ne|lt|le|gt|ge|sa|eb)?(\d{4}(?:-\d{2}(?:-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?)?)?)?)$/.exec(value);
  if (!m) throw badRequest(`date: "${value}" is not a FHIR date search value (prefix eq, lt, le, gt, ge, sa, eb and a date)`, 'date');
  const prefix = m[1] ?? 'eq';
  const { start, end } = dateRange(m[2]);
  const at = (t: Date) => `${param(t.toISOString())}::timestamptz`;
  switch (prefix) {
    case 'lt':
    case 'eb':
      return `recorded < ${at(start)}`;
    case 'le':
      return `recorded < ${at(end)}`;
    case 'gt':
    case 'sa':
      return `recorded >= ${at(end)}`;
    case 'ge':
      return `recorded >= ${at(start)}`;
    case 'ne':
      return `(recorded < ${at(start)} OR recorded >= ${at(end)})`;
    default:
      return `(recorded >= ${at(start)} AND recorded < ${at(end)})`;
  }
}

/** The instants a date of some precision covers: [start, end). A time without a zone is UTC. */
function dateRange(text: string): { start: Date; end: Date } {
  const [y, mo = 1, d = 1] = text.slice(0, 10).split('-').map(Number);
  if (text.length === 4) return { start: new Date(Date.UTC(y, 0, 1)), end: new Date(Date.UTC(y + 1, 0, 1)) };
  if (text.length === 7) return { start: new Date(Date.UTC(y, mo - 1, 1)), end: new Date(Date.UTC(y, mo, 1)) };
  if (text.length === 10) return { start: new Date(Date.UTC(y, mo - 1, d)), end: new Date(Date.UTC(y, mo - 1, d + 1)) };
  const zoned = /(Z|[+-]\d{2}:\d{2})$/.test(text) ? text : `${text}Z`;
  const start = new Date(zoned);
  if (Number.isNaN(start.getTime())) throw badRequest(`date: "${text}" is not a valid instant`, 'date');
  const seconds = /T\d{2}:\d{2}:\d{2}/.test(text);
  return { start, end: new Date(start.getTime() + (seconds ? 1000 : 60_000)) };
}

function localReference(value: string, base: string): string {
  return value.startsWith(`${base}/`) ? value.slice(base.length + 1) : value;
}

function patientReference(value: string, base: string): string {
  const local = localReference(value, base);
  return local.includes('/') ? local : `Patient/${local}`;
}

function encodeCursor(recorded: Date, id: string): string {
  return Buffer.from(`${recorded.toISOString()}|${id}`, 'utf8').toString('base64url');
}

function decodeCursor(value: string): { recorded: string; id: string } {
  const [recorded, id] = Buffer.from(value, 'base64url').toString('utf8').split('|');
  if (!recorded || !id || Number.isNaN(Date.parse(recorded)) || !isUuid(id)) throw badRequest('_cursor: not a cursor of this server (take the next link as it is)', '_cursor');
  return { recorded, id };
}

function isUuid(id: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);
}
