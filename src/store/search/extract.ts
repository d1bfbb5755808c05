import type { Resource } from '@medplum/fhirtypes';
import { compiledFhirPath, evalFhirPathTyped, lacksElement, memberValues, singleTypeMemberValues, toTypedValue, type TypedValue } from '../../server-lib/medplum';
import { ensureR4Schema } from '../../server-lib/r4-definitions';
import { parseReference } from '../../server-lib/references';
import { parseDateRange, periodRange, type DateRange } from './dates';
import { fullValue, indexKey, nullableKey } from './index-key';
import { COMPOUND_INDEXES, searchParams, TOKEN_DATE_INDEXES, type SearchParamDef } from './parameters';

export interface TokenRow {
  param: string;
  system: string | null;
  code: string | null;
  /** The code when `code` holds its bounded key (index-key.ts), else null; `systemFull` likewise. */
  codeFull?: string | null;
  systemFull?: string | null;
}
export interface ReferenceRow {
  param: string;
  targetType: string | null;
  targetId: string | null;
  targetUrl: string;
}
export interface DateRow {
  param: string;
  range: DateRange;
}
export interface StringRow {
  param: string;
  norm: string;
  exact: string;
  /** The normalised value when `norm` holds its bounded key (index-key.ts), else null. */
  normFull?: string | null;
}
export interface CompoundRow {
  ref: string;
  code: string;
  range: DateRange;
}
/** A token and a date of one resource together (TOKEN_DATE_INDEXES); system and code are index keys. */
export interface TokenDateRow {
  system: string | null;
  code: string;
  range: DateRange;
}
export interface IndexRows {
  tokens: TokenRow[];
  references: ReferenceRow[];
  dates: DateRow[];
  strings: StringRow[];
  compounds: CompoundRow[];
  tokenDates: TokenDateRow[];
}

/**
 * Index rows of one resource: every search parameter of its type evaluated with its FHIRPath
 * expression (no hand-written per-field extraction).
 */
export function extractIndexRows(resource: Resource, baseUrl?: string): IndexRows {
  ensureR4Schema();
  const rows: IndexRows = { tokens: [], references: [], dates: [], strings: [], compounds: [], tokenDates: [] };
  const root = [toTypedValue(resource)];
  for (const def of searchParams(resource.resourceType).values()) {
    if (def.code === '_id' || def.code === '_lastUpdated') continue;
    let values: TypedValue[];
    try {
      values = valuesOf(resource, root, def.expression);
    } catch {
      continue;
    }
    if (values.length === 0) continue;
    switch (def.type) {
      case 'token':
        for (const v of values) pushTokens(rows.tokens, def.code, v, def.implicitSystem);
        break;
      case 'uri':
        for (const v of values) if (typeof v.value === 'string') rows.tokens.push({ param: def.code, system: null, code: v.value });
        break;
      case 'reference':
        for (const v of values) pushReference(rows.references, def.code, v, baseUrl);
        break;
      case 'date':
        for (const v of values) {
          const range = dateRangeOf(v);
          if (range) rows.dates.push({ param: def.code, range });
        }
        break;
      case 'string':
        for (const v of values) for (const s of stringsOf(v)) rows.strings.push({ param: def.code, norm: normalizeString(s), exact: s });
        break;
      case 'composite':
        pushComposite(rows.tokens, def, values);
        break;
      default:
        break;
    }
  }
  boundKeys(rows);
  const compound = COMPOUND_INDEXES[resource.resourceType];
  if (compound) {
    for (const r of rows.references) {
      if (r.param !== compound.reference || !r.targetType || !r.targetId) continue;
      for (const t of rows.tokens) {
        if (t.param !== compound.token || t.code === null) continue;
        for (const d of rows.dates) if (d.param === compound.date) rows.compounds.push({ ref: `${r.targetType}/${r.targetId}`, code: t.code, range: d.range });
      }
    }
  }
  const pair = TOKEN_DATE_INDEXES[resource.resourceType];
  if (pair) {
    for (const t of rows.tokens) {
      if (t.param !== pair.token || t.code === null) continue;
      for (const d of rows.dates) if (d.param === pair.date) rows.tokenDates.push({ system: t.system, code: t.code, range: d.range });
    }
  }
  return dedupe(rows);
}

/**
 * A search parameter's expression that is a path of members from the resource, perhaps filtered at
 * its end (`Appointment.meta.security`, `Appointment.participant.actor.where(resolve() is Patient)`):
 * the resource type and the member names; anything else (unions, functions mid-path) is null.
 */
const PLAIN_PATH = /^([A-Z][A-Za-z]*)((?:\.[a-z][A-Za-z0-9]*)+)(\.(?:where|ofType)\([^()|]*(?:\(\))?[^()|]*\))?$/;
/** The filter of the reference parameters that name one target type (`.where(resolve() is Patient)`). */
const RESOLVES_TO = /^\.where\(resolve\(\) is ([A-Z][A-Za-z]*)\)$/;
interface PlainPath {
  type: string;
  members: string[];
  filtered: boolean;
  /** The type a `where(resolve() is T)` filter keeps. */
  resolvesTo?: string;
}
const plainPaths = new Map<string, PlainPath | null>();

function plainPath(expression: string): PlainPath | null {
  let path = plainPaths.get(expression);
  if (path === undefined) {
    const m = PLAIN_PATH.exec(expression);
    const resolvesTo = m?.[3] ? RESOLVES_TO.exec(m[3])?.[1] : undefined;
    path = m ? { type: m[1], members: m[2].slice(1).split('.'), filtered: m[3] !== undefined, ...(resolvesTo ? { resolvesTo } : {}) } : null;
    plainPaths.set(expression, path);
  }
  return path;
}

/**
 * What the expression finds: member by member for a plain path without filter or with a
 * `where(resolve() is T)` filter; nothing for another filtered one whose path is absent; else by
 * FHIRPath.
 */
function valuesOf(resource: Resource, root: TypedValue[], expression: string): TypedValue[] {
  const path = plainPath(expression);
  if (!path || path.type !== resource.resourceType) return evalFhirPathTyped(compiledFhirPath(expression), root);
  if (path.filtered && !path.resolvesTo) return absent(resource, expression) ? [] : evalFhirPathTyped(compiledFhirPath(expression), root);
  let nodes = root;
  for (const member of path.members) nodes = singleTypeMemberValues(nodes, member) ?? memberValues(nodes, member);
  const target = path.resolvesTo;
  return target ? nodes.filter((n) => resolvedType(n.value) === target) : nodes;
}

/**
 * The resource type FHIRPath's `resolve()` gives a reference without reading it, as medplum's
 * evaluator does: a contained `resource`'s type; else the type before `?` of a conditional
 * reference (`type` with an `identifier` counts as one); else the first segment of a
 * `Type/id` reference. An absolute URL's first segment is its scheme, so it names no type here,
 * as there; `#contained` and a bare id resolve to nothing.
 */
export function resolvedType(value: unknown): string | undefined {
  let reference: string | undefined;
  if (typeof value === 'string') reference = value;
  else if (value && typeof value === 'object') {
    const o = value as { resource?: { resourceType?: unknown }; reference?: string; type?: string; identifier?: { system?: string; value?: string } };
    if (o.resource) return typeof o.resource.resourceType === 'string' ? o.resource.resourceType : undefined;
    if (o.reference) reference = o.reference;
    else if (o.type && o.identifier) return o.type;
  }
  if (reference === undefined) return undefined;
  const q = reference.indexOf('?');
  if (q >= 0) return reference.slice(0, q);
  const slash = reference.indexOf('/');
  return slash >= 0 ? reference.slice(0, slash) : undefined;
}

/**
 * True when the resource's JSON shows that a plain path expression finds nothing: at some step no
 * node has the member, nor a choice form of it (`value` as `valueQuantity`) or a primitive's
 * extension (`_status`). FHIRPath then gives the empty collection, and a filter of it too; most
 * search parameters of a resource name elements it does not have, and finding them absent was
 * most of a write's index extraction. Anything this cannot tell is evaluated.
 */
export function absent(resource: Resource, expression: string): boolean {
  const path = plainPath(expression);
  if (!path || path.type !== resource.resourceType) return false;
  let nodes: unknown[] = [resource];
  for (const member of path.members) {
    const next: unknown[] = [];
    for (const node of nodes) {
      if (node === null || typeof node !== 'object') return false; // a primitive's members: its extension (`_x`)
      const o = node as Record<string, unknown>;
      if (lacksElement(o, member)) continue;
      const v = o[member];
      if (v === undefined) return false; // only its extension (`_x`) or a choice form
      if (Array.isArray(v)) next.push(...v);
      else next.push(v);
    }
    if (next.length === 0) return true;
    nodes = next;
  }
  return false;
}

/** `implicitSystem`: the system a bound primitive `code` stands in (see SearchParamDef). */
function pushTokens(out: TokenRow[], param: string, v: TypedValue, implicitSystem?: string): void {
  const value = v.value as Record<string, unknown> | string | boolean | number | undefined;
  if (value === undefined || value === null) return;
  if (typeof value !== 'object') {
    out.push({ param, system: typeof value === 'string' && implicitSystem ? implicitSystem : null, code: String(value) });
    return;
  }
  switch (v.type) {
    case 'CodeableConcept':
      for (const c of (value.coding as { system?: string; code?: string }[] | undefined) ?? []) out.push({ param, system: c.system ?? null, code: c.code ?? null });
      break;
    case 'Coding':
      out.push({ param, system: (value.system as string) ?? null, code: (value.code as string) ?? null });
      break;
    case 'Identifier':
    case 'ContactPoint':
      out.push({ param, system: (value.system as string) ?? null, code: (value.value as string) ?? null });
      break;
    default:
      if ('code' in value) out.push({ param, system: (value.system as string) ?? null, code: String(value.code) });
  }
}

function pushReference(out: ReferenceRow[], param: string, v: TypedValue, baseUrl?: string): void {
  const value = v.value as { reference?: string; type?: string } | string | undefined;
  if (!value) return;
  const reference = typeof value === 'string' ? value : value.reference;
  if (!reference) return;
  const local = baseUrl && reference.startsWith(`${baseUrl}/`) ? reference.slice(baseUrl.length + 1) : reference;
  const parsed = parseReference(local);
  out.push({ param, targetType: parsed?.type ?? null, targetId: parsed?.id ?? null, targetUrl: reference });
}

function dateRangeOf(v: TypedValue): DateRange | undefined {
  const value = v.value as unknown;
  if (typeof value === 'string') return parseDateRange(value);
  if (value && typeof value === 'object') {
    const o = value as { start?: string; end?: string };
    if (v.type === 'Period' || 'start' in o || 'end' in o) return periodRange(o.start, o.end);
  }
  return undefined;
}

function stringsOf(v: TypedValue): string[] {
  const value = v.value as unknown;
  if (typeof value === 'string') return [value];
  if (!value || typeof value !== 'object') return [];
  const out: string[] = [];
  const o = value as Record<string, unknown>;
  // HumanName and Address: every textual part is searchable.
  for (const key of ['text', 'family', 'given', 'prefix', 'suffix', 'line', 'city', 'district', 'state', 'postalCode', 'country']) {
    const part = o[key];
    if (typeof part === 'string') out.push(part);
    else if (Array.isArray(part)) out.push(...part.filter((p): p is string => typeof p === 'string'));
  }
  return out;
}

/** Lower case without diacritics: FHIR string search is case- and accent-insensitive. */
export function normalizeString(s: string): string {
  return s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase();
}

/**
 * token$token composites (e.g. `context-type-value`): one row per component pair, stored as
 * system = `system|code` of the first and code = `system|code` of the second.
 */
function pushComposite(out: TokenRow[], def: SearchParamDef, bases: TypedValue[]): void {
  if (!def.components || def.components.length !== 2) return;
  for (const base of bases) {
    const first: TokenRow[] = [];
    const second: TokenRow[] = [];
    try {
      for (const v of evalFhirPathTyped(compiledFhirPath(def.components[0]), [base])) pushTokens(first, def.code, v);
      for (const v of evalFhirPathTyped(compiledFhirPath(def.components[1]), [base])) pushTokens(second, def.code, v);
    } catch {
      continue;
    }
    for (const a of first) for (const b of second) out.push({ param: def.code, system: `${a.system ?? ''}|${a.code ?? ''}`, code: `${b.system ?? ''}|${b.code ?? ''}` });
  }
}

/**
 * Every text bound for an indexed column as its bounded key (index-key.ts); the whole code and
 * normalised string (and system) stay beside it for prefix and substring matches. `exact` and `targetUrl` are
 * not indexed and stay as written.
 */
function boundKeys(rows: IndexRows): void {
  rows.tokens = rows.tokens.map((t) => ({ param: t.param, system: nullableKey(t.system), code: nullableKey(t.code), systemFull: fullValue(t.system), codeFull: fullValue(t.code) }));
  rows.strings = rows.strings.map((x) => ({ param: x.param, norm: indexKey(x.norm), exact: x.exact, normFull: fullValue(x.norm) }));
  rows.references = rows.references.map((r) => ({ ...r, targetType: nullableKey(r.targetType), targetId: nullableKey(r.targetId) }));
}

/** Each row once, by its content. */
function dedupe(rows: IndexRows): IndexRows {
  const uniq = <T>(xs: T[], key: (x: T) => string) => {
    if (xs.length < 2) return xs;
    const seen = new Map<string, T>();
    for (const x of xs) {
      const k = key(x);
      if (!seen.has(k)) seen.set(k, x);
    }
    return seen.size === xs.length ? xs : [...seen.values()];
  };
  const range = (r: DateRange) => `${r.low}\u0000${r.high}`;
  return {
    tokens: uniq(rows.tokens, (t) => `${t.param}\u0000${t.system}\u0000${t.code}\u0000${t.systemFull}\u0000${t.codeFull}`),
    references: uniq(rows.references, (r) => `${r.param}\u0000${r.targetType}\u0000${r.targetId}\u0000${r.targetUrl}`),
    dates: uniq(rows.dates, (d) => `${d.param}\u0000${range(d.range)}`),
    strings: uniq(rows.strings, (x) => `${x.param}\u0000${x.norm}\u0000${x.exact}\u0000${x.normFull}`),
    compounds: uniq(rows.compounds, (c) => `${c.ref}\u0000${c.code}\u0000${range(c.range)}`),
    tokenDates: uniq(rows.tokenDates, (t) => `${t.system}\u0000${t.code}\u0000${range(t.range)}`),
  };
}
