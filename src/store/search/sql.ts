import type { Resource } from '@medplum/fhirtypes';
import type { Db } from '../db';
import { isFhirId } from '../../server-lib/fhir-id';
import { parseReference } from '../../server-lib/references';
import type { Caller } from '../../common/identity';
import { KVID_SYSTEM, PUBLIC_TO_PATIENTS } from '../../server-lib/owner';
import { batchedReads } from './batched-reads';
import { parseDateRange, toTimestamp, type DateRange } from './dates';
import { normalizeString } from './extract';
import { indexKey, leadingChars, PREFIX_CHARS } from './index-key';
import { COMPOUND_INDEXES, searchParam, SHORT_RANGE_MS, TOKEN_DATE_INDEXES } from './parameters';
import { splitDatePrefix, type Filter, type IncludeSpec, type SearchRequest } from './query';

export type { SearchRequest } from './query';

/** A match as the store keeps it: its type, id and JSON text, not parsed: an answer copies it as stored. */
export interface StoredMatch {
  resourceType: string;
  id: string;
  json: string;
}

export interface SearchResult {
  /** The page's matches in order, as stored: what an answer can copy without parsing. */
  readonly matches: readonly StoredMatch[];
  /** The same matches parsed, on first use (once per result). */
  readonly resources: Resource[];
  readonly total: number;
  readonly included: Resource[];
}

/** A search result whose matches are parsed only when someone asks for them as resources. */
export function searchResult(matches: readonly StoredMatch[], total: number, included: Resource[]): SearchResult {
  let parsed: Resource[] | undefined;
  return {
    matches,
    total,
    included,
    get resources() {
      return (parsed ??= matches.map((m) => JSON.parse(m.json) as Resource));
    },
  };
}

interface Ctx {
  params: unknown[];
  scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>;
  now: Date;
  baseUrl: string;
  aliases?: number;
}

/** Parameter placeholder for a value. */
function p(ctx: Ctx, value: unknown): string {
  ctx.params.push(value);
  return `$${ctx.params.length}`;
}

/** Table aliases numbered per query, so one query shape always has the same SQL text. */
function alias(ctx: Ctx, prefix: string): string {
  ctx.aliases = (ctx.aliases ?? 0) + 1;
  return `${prefix}${ctx.aliases}`;
}

/** Filter kinds that can drive a search through a lookup index, most selective first. */
const DRIVER_PRIORITY: Record<string, number> = { reference: 0, token: 1, uri: 1, composite: 2, string: 3, date: 4 };

/**
 * Translates a parsed search into SQL on the index tables, runs it, and loads includes.
 *
 * Plan: the most selective plain filter (a reference beats a token beats a date) yields the
 * candidate ids through its lookup index; every other filter is an `EXISTS` probe per candidate
 * (`OFFSET 0` keeps PostgreSQL from turning probes into hash joins over whole index tables, which
 * it prefers on its estimates and which costs far more for the typical ISiK slot query). Matches
 * are counted and paged in one statement, and only the page's rows are read from `resource`.
 */
export async function executeSearch(db: Db, request: SearchRequest, opts: { scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>; now: Date; baseUrl: string }): Promise<SearchResult> {
  const ctx: Ctx = { params: [], scope: opts.scope, now: opts.now, baseUrl: opts.baseUrl };
  const typeParam = p(ctx, request.resourceType);
  const compound = compoundDriver(ctx, request, typeParam);
  const covered = compound?.covered ?? new Set<number>();
  const driverIndex = compound ? -1 : pickDriver(request);
  let source: string;
  const where: string[] = [];
  if (compound) {
    source = compound.source;
    const owner = ownerProbe(ctx, request.resourceType);
    if (owner) where.push(owner);
  } else if (driverIndex >= 0) {
    const driver = request.filters[driverIndex];
    const def = searchParam(request.resourceType, driver.param)!;
    const d = alias(ctx, 'd');
    const values = driver.values.map((v) => valueCondition(ctx, def.type, d, v, driver.modifier)).join(driver.allOf ? ' AND ' : ' OR ');
    source = `(SELECT DISTINCT ${d}.resource_type, ${d}.id FROM ${tableOf(def.type)} ${d} WHERE ${d}.resource_type = ${typeParam} AND ${d}.param = ${p(ctx, driver.param)} AND (${values})) r`;
    const owner = ownerProbe(ctx, request.resourceType);
    if (owner) where.push(owner);
  } else {
    source = 'resource r';
    where.push(`r.resource_type = ${typeParam}`, 'NOT r.deleted');
    const owner = scopeSql(ctx, 'r');
    if (owner) where.push(owner);
  }
  request.filters.forEach((filter, i) => {
    if (i !== driverIndex && !covered.has(i)) where.push(filterSql(ctx, request.resourceType, 'r', filter));
  });
  const matches = `SELECT r.resource_type, r.id FROM ${source}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`;
  const order = [...request.sort.map((s) => sortSql(ctx, request.resourceType, s.param, s.descending)), 'm.id'].join(', ');
  const limit = request.totalOnly ? 0 : request.count;
  // The content as text: the answer copies it as stored instead of parsing and writing it again.
  type Row = { total: string | number; resource_type: string | null; id: string | null; content: string | null };
  const sql = `WITH m AS MATERIALIZED (${matches}),
          page AS (SELECT m.resource_type, m.id, row_number() OVER (ORDER BY ${order}) AS n FROM m ORDER BY ${order} LIMIT ${p(ctx, limit)} OFFSET ${p(ctx, request.offset)})
     SELECT (SELECT count(*) FROM m) AS total, res.resource_type, res.id, res.content::text AS content, page.n AS pos
       FROM (SELECT 1) one
       LEFT JOIN page ON true
       LEFT JOIN resource res ON res.resource_type = page.resource_type AND res.id = page.id
      ORDER BY page.n`;
  // Outside a transaction, searches of the same shape asked for at the same moment share one statement.
  const rows = db.inTransaction ? (await db.query<Row>(sql, ctx.params, { prepare: true })).rows : await batchedReads(db).query<Row>(sql, ctx.params, 'pos');
  const total = Number(rows[0]?.total ?? 0);
  const found: StoredMatch[] = [];
  for (const row of rows) if (row.content !== null) found.push({ resourceType: row.resource_type as string, id: row.id as string, json: row.content });
  const included = await loadIncludes(db, opts, request, found);
  return searchResult(found, total, included);
}

/**
 * The compound (reference, token, date) index as driver, when the request filters on its
 * reference with one local target and on its date (and optionally on its token with one plain
 * code): one GiST scan yields exactly the matches of those filters, which then need no probes.
 */
function compoundDriver(ctx: Ctx, request: SearchRequest, typeParam: string): { source: string; covered: Set<number> } | undefined {
  const found = compoundFilters(request, ctx.baseUrl);
  if (!found) return chainedCompoundDriver(ctx, request, typeParam) ?? tokenDateDriver(ctx, request, typeParam);
  const { ref, refIndex, dateIndex, tokenIndex, window } = found;
  const c = alias(ctx, 'c');
  const dates = request.filters[dateIndex].values;
  const keys = [
    `${c}.resource_type = ${typeParam}`,
    `${c}.ref = ${p(ctx, ref)}`,
    ...(tokenIndex >= 0 ? [`${c}.code = ${p(ctx, indexKey(request.filters[tokenIndex].values[0]))}`] : []),
  ];
  const rows = windowRows(ctx, 'search_compound', c, keys, window, dates);
  const covered = new Set([refIndex, dateIndex, ...(tokenIndex >= 0 ? [tokenIndex] : [])]);
  return { source: `(SELECT DISTINCT ${c}.resource_type, ${c}.id FROM (${rows}) ${c}) r`, covered };
}

/**
 * The compound index as driver for a chain through its reference and a date filter
 * (`Slot?schedule.actor=Practitioner/X&status=free&start=ge..&start=le..`): the chain's targets
 * (a practitioner's few Schedules) are found first, then their compound rows in the window, so the
 * cost follows the calendars named, not the store. Otherwise the token (`status=free`, most slots)
 * would drive, with a probe of the chain and the date per candidate.
 */
function chainedCompoundDriver(ctx: Ctx, request: SearchRequest, typeParam: string): { source: string; covered: Set<number> } | undefined {
  const cfg = COMPOUND_INDEXES[request.resourceType];
  if (!cfg) return undefined;
  const plain = (f: Filter) => !f.chain.length && !f.has && !f.modifier;
  const chainIndex = request.filters.findIndex((f) => !f.has && f.chain.length === 1 && f.chain[0].param === cfg.reference && f.chain[0].targetType !== undefined);
  const dateIndex = request.filters.findIndex((f) => f.param === cfg.date && plain(f) && (f.allOf || f.values.length === 1));
  if (chainIndex < 0 || dateIndex < 0) return undefined;
  const tokenIndex = request.filters.findIndex((f) => f.param === cfg.token && plain(f) && f.values.length === 1 && !f.values[0].includes('|'));
  const chained = request.filters[chainIndex];
  const link = chained.chain[0];
  const targets = chainTargets(ctx, link.targetType!, { ...chained, chain: [] });
  const window = boundingWindow(request.filters[dateIndex].values);
  const c = alias(ctx, 'c');
  const k = alias(ctx, 'k');
  const keys = [
    `${c}.resource_type = ${typeParam}`,
    `${c}.ref = ${k}.ref`,
    ...(tokenIndex >= 0 ? [`${c}.code = ${p(ctx, indexKey(request.filters[tokenIndex].values[0]))}`] : []),
  ];
  const rows = windowRows(ctx, 'search_compound', c, keys, window, request.filters[dateIndex].values);
  const covered = new Set([chainIndex, dateIndex, ...(tokenIndex >= 0 ? [tokenIndex] : [])]);
  // Per target, its window (LATERAL, kept apart by OFFSET 0): joined, the planner would read the
  // window of every calendar in the store and hash it against the targets.
  const windows = `(${targets}) ${k}(ref) CROSS JOIN LATERAL (SELECT ${c}.resource_type, ${c}.id FROM (${rows}) ${c} OFFSET 0) ${c}`;
  return { source: `(SELECT DISTINCT ${c}.resource_type, ${c}.id FROM ${windows}) r`, covered };
}

/**
 * `Type/id` of every resource of `type` the viewer sees that matches `filter` (the last link of a
 * chain): through the filter's lookup index where it has one (`Schedule?actor=Practitioner/X`
 * reads the practitioner's rows, not every Schedule in the store), else every resource of the
 * type checked.
 */
function chainTargets(ctx: Ctx, type: string, filter: Filter): string {
  const t = alias(ctx, 't');
  const typeParam = p(ctx, type);
  const def = searchParam(type, filter.param);
  if (!def || driverRank(type, filter) === undefined) {
    return `SELECT ${t}.resource_type || '/' || ${t}.id FROM resource ${t} WHERE ${t}.resource_type = ${typeParam} AND NOT ${t}.deleted ${andIf(scopeSql(ctx, t))} AND ${filterSql(ctx, type, t, filter)}`;
  }
  const d = alias(ctx, 'd');
  const values = filter.values.map((v) => valueCondition(ctx, def.type, d, v, filter.modifier)).join(filter.allOf ? ' AND ' : ' OR ');
  return `SELECT DISTINCT ${d}.resource_type || '/' || ${d}.id FROM ${tableOf(def.type)} ${d} WHERE ${d}.resource_type = ${typeParam} AND ${d}.param = ${p(ctx, filter.param)} AND (${values})
    AND EXISTS (SELECT 1 FROM resource ${t} WHERE ${t}.resource_type = ${d}.resource_type AND ${t}.id = ${d}.id AND NOT ${t}.deleted ${andIf(scopeSql(ctx, t))} OFFSET 0)`;
}

/**
 * The token-and-date index (TOKEN_DATE_INDEXES) as driver, when the request filters on its token
 * with one value naming a code and on its date (`Slot?service-type=…|57&start=ge…&start=le…`):
 * one GiST scan over the code's rows in the window yields exactly the matches of both filters.
 */
function tokenDateDriver(ctx: Ctx, request: SearchRequest, typeParam: string): { source: string; covered: Set<number> } | undefined {
  const pair = TOKEN_DATE_INDEXES[request.resourceType];
  if (!pair) return undefined;
  const plain = (f: Filter) => !f.chain.length && !f.has && !f.modifier;
  const tokenIndex = request.filters.findIndex((f) => f.param === pair.token && plain(f) && f.values.length === 1 && !f.values[0].endsWith('|'));
  const dateIndex = request.filters.findIndex((f) => f.param === pair.date && plain(f) && (f.allOf || f.values.length === 1));
  if (tokenIndex < 0 || dateIndex < 0) return undefined;
  const window = boundingWindow(request.filters[dateIndex].values);
  const x = alias(ctx, 'x');
  const keys = [`${x}.resource_type = ${typeParam}`, tokenCondition(ctx, x, request.filters[tokenIndex].values[0])];
  const rows = windowRows(ctx, 'search_token_date', x, keys, window, request.filters[dateIndex].values);
  return { source: `(SELECT DISTINCT ${x}.resource_type, ${x}.id FROM (${rows}) ${x}) r`, covered: new Set([tokenIndex, dateIndex]) };
}

/**
 * The rows of a window table (`search_compound`, `search_token_date`) under alias `a` that match
 * `keys` (conditions on its other columns) and the date filter's `values` within `window`: its
 * short ranges through the B-tree over their start (a short range overlaps the window only if it
 * starts at most SHORT_RANGE_MS before it), the others through their GiST index (migrations/009).
 */
function windowRows(ctx: Ctx, table: string, a: string, keys: string[], window: DateRange, values: string[]): string {
  const overlaps = `${a}.during && tstzrange(${p(ctx, toTimestamp(window.low))}::timestamptz, ${p(ctx, toTimestamp(window.high))}::timestamptz, '[]')`;
  const matches = [overlaps, ...values.map((v) => dateCondition(ctx, `lower(${a}.during)`, `upper(${a}.during)`, v))];
  const starts = [
    `lower(${a}.during) >= ${p(ctx, toTimestamp(window.low - SHORT_RANGE_MS))}::timestamptz`,
    `lower(${a}.during) <= ${p(ctx, toTimestamp(window.high))}::timestamptz`,
  ];
  const select = (conditions: string[]) => `SELECT ${a}.resource_type, ${a}.id FROM ${table} ${a} WHERE ${[...keys, ...conditions, ...matches].join(' AND ')}`;
  return `${select([`${a}.short`, ...starts])} UNION ALL ${select([`NOT ${a}.short`])}`;
}

/** The filters of a request the compound index can drive, and the reference target and date window they ask for. */
export interface CompoundFilters {
  ref: string;
  refIndex: number;
  dateIndex: number;
  /** -1: no token filter the index covers. */
  tokenIndex: number;
  /** Bounds every match's date lies in (possibly infinite). */
  window: DateRange;
}

/** The compound index (COMPOUND_INDEXES) fits: one local reference target and a date filter, plain. */
export function compoundFilters(request: SearchRequest, baseUrl: string): CompoundFilters | undefined {
  const cfg = COMPOUND_INDEXES[request.resourceType];
  if (!cfg) return undefined;
  const plain = (f: Filter) => !f.chain.length && !f.has && !f.modifier;
  const refIndex = request.filters.findIndex((f) => f.param === cfg.reference && plain(f) && f.values.length === 1);
  const dateIndex = request.filters.findIndex((f) => f.param === cfg.date && plain(f) && (f.allOf || f.values.length === 1));
  if (refIndex < 0 || dateIndex < 0) return undefined;
  const ref = localReference(baseUrl, request.resourceType, cfg.reference, request.filters[refIndex].values[0]);
  if (!ref) return undefined;
  const tokenIndex = request.filters.findIndex((f) => f.param === cfg.token && plain(f) && f.values.length === 1 && !f.values[0].includes('|'));
  return { ref, refIndex, dateIndex, tokenIndex, window: boundingWindow(request.filters[dateIndex].values) };
}

/** `Type/id` of a reference search value that points into this repository, else undefined. */
function localReference(baseUrl: string, type: string, param: string, value: string): string | undefined {
  const local = value.startsWith(`${baseUrl}/`) ? value.slice(baseUrl.length + 1) : value;
  if (/^[a-z]+:/i.test(local)) return undefined;
  const parsed = parseReference(local);
  if (parsed && local.includes('/')) return `${parsed.type}/${parsed.id}`;
  const targets = searchParam(type, param)?.target ?? [];
  return targets.length === 1 && isFhirId(local) ? `${targets[0]}/${local}` : undefined;
}

/**
 * A range every value of an AND-ed date filter confines matches to (index bound, not the match
 * itself: `dateCondition` still decides). `ge` targets all end at or after the search value's
 * start (`low >= s.low` or `high > s.high`), `le` targets all start at or before its end.
 */
function boundingWindow(values: string[]): DateRange {
  let low = -Infinity;
  let high = Infinity;
  for (const raw of values) {
    const [prefix, v] = splitDatePrefix(raw);
    const r = parseDateRange(v) as DateRange;
    if (prefix === 'ge') low = Math.max(low, r.low);
    else if (prefix === 'gt' || prefix === 'sa') low = Math.max(low, r.high);
    else if (prefix === 'le') high = Math.min(high, r.high);
    else if (prefix === 'lt' || prefix === 'eb') high = Math.min(high, r.low);
    else if (prefix === 'eq') {
      low = Math.max(low, r.low);
      high = Math.min(high, r.high);
    }
  }
  return high < low ? { low: high, high: high } : { low, high };
}

/** Index of the filter that yields candidates, or -1 to scan the type's resources. */
function pickDriver(request: SearchRequest): number {
  let best = -1;
  let bestRank = Infinity;
  request.filters.forEach((f, i) => {
    const rank = driverRank(request.resourceType, f);
    if (rank !== undefined && rank < bestRank) {
      best = i;
      bestRank = rank;
    }
  });
  return best;
}

/** DRIVER_PRIORITY of a filter that can yield candidates through its lookup index; undefined when it cannot (a chain, `_has`, `:not`, `:missing`, `_id`, `_lastUpdated`). */
function driverRank(type: string, f: Filter): number | undefined {
  if (f.chain.length || f.has || f.modifier === 'not' || f.modifier === 'missing' || f.param === '_id' || f.param === '_lastUpdated') return undefined;
  const def = searchParam(type, f.param);
  return def ? DRIVER_PRIORITY[def.type] : undefined;
}

function tableOf(type: string): string {
  return type === 'reference' ? 'search_reference' : type === 'date' ? 'search_date' : type === 'string' ? 'search_string' : 'search_token';
}

/**
 * The owner check of a candidate found through an index table (its `resource` row looked up). For
 * an institution's search of a type everyone may see, the check of each candidate is skipped
 * while no resource of the type belongs to another institution: one probe of a partial index
 * (migrations/011_owned_public_resources.sql) that holds no row in a store where only owners and
 * the repository write calendars. A search by service and day has thousands of candidates.
 */
function ownerProbe(ctx: Ctx, type: string): string {
  const owner = scopeSql(ctx, 'o');
  if (!owner) return '';
  const probe = `EXISTS (SELECT 1 FROM resource o WHERE o.resource_type = r.resource_type AND o.id = r.id AND ${owner} OFFSET 0)`;
  const institution = ctx.scope?.institution;
  if (ctx.scope?.patient !== undefined || !institution || !PUBLIC_TO_PATIENTS.includes(type)) return probe;
  // The type as a literal (one of PUBLIC_TO_PATIENTS): the planner proves the partial index's condition from it.
  const f = alias(ctx, 'f');
  return `(NOT EXISTS (SELECT 1 FROM resource ${f} WHERE ${f}.resource_type = '${type}' AND ${f}.owner IS NOT NULL AND ${f}.owner <> ${p(ctx, institution)}) OR ${probe})`;
}

/** The SQL form of server-lib/owner.ts `canSee`: what the viewer may see of resource row `r`. */
function scopeSql(ctx: Ctx, r: string): string {
  if (!ctx.scope || ctx.scope.isOwner) return '';
  const own = `${r}.owner = ${p(ctx, ctx.scope.institution)}`;
  if (ctx.scope.patient === undefined) return `(${r}.owner IS NULL OR ${own})`;
  const t = alias(ctx, 'k');
  const carries = `EXISTS (SELECT 1 FROM search_token ${t} WHERE ${t}.resource_type = 'Patient' AND ${t}.id = ${r}.id AND ${t}.param = 'identifier'
    AND ${t}.system = ${p(ctx, indexKey(KVID_SYSTEM))} AND ${t}.code = ${p(ctx, indexKey(ctx.scope.patient))})`;
  return `(${own} OR (${r}.owner IS NULL AND ${r}.resource_type = ANY(${p(ctx, PUBLIC_TO_PATIENTS)})) OR (${r}.resource_type = 'Patient' AND ${carries}))`;
}

/** A boolean SQL expression: does resource `r` (alias of a `resource` row) match the filter. */
function filterSql(ctx: Ctx, type: string, r: string, filter: Filter): string {
  if (filter.has) {
    const h = alias(ctx, 'h');
    const hr = alias(ctx, 'hr');
    const inner = filterSql(ctx, filter.has.type, hr, { ...filter, has: undefined });
    return `EXISTS (SELECT 1 FROM search_reference ${h} JOIN resource ${hr} ON ${hr}.resource_type = ${h}.resource_type AND ${hr}.id = ${h}.id AND NOT ${hr}.deleted
      WHERE ${h}.resource_type = ${p(ctx, filter.has.type)} AND ${h}.param = ${p(ctx, filter.has.param)} AND ${h}.target_type = ${r}.resource_type AND ${h}.target_id = ${r}.id
      ${andIf(scopeSql(ctx, hr))} AND ${inner})`;
  }
  if (filter.chain.length > 0) {
    const [link, ...rest] = filter.chain;
    const c = alias(ctx, 'c');
    const t = alias(ctx, 't');
    const inner = filterSql(ctx, link.targetType!, t, { ...filter, chain: rest });
    return `EXISTS (SELECT 1 FROM search_reference ${c} JOIN resource ${t} ON ${t}.resource_type = ${c}.target_type AND ${t}.id = ${c}.target_id AND NOT ${t}.deleted
      WHERE ${c}.resource_type = ${r}.resource_type AND ${c}.id = ${r}.id AND ${c}.param = ${p(ctx, link.param)} AND ${c}.target_type = ${p(ctx, link.targetType)}
      ${andIf(scopeSql(ctx, t))} AND ${inner})`;
  }
  return paramSql(ctx, type, r, filter);
}

const andIf = (sql: string) => (sql ? `AND ${sql}` : '');

function paramSql(ctx: Ctx, type: string, r: string, filter: Filter): string {
  const { param, modifier, values } = filter;
  if (param === '_id') {
    if (modifier === 'missing') return values[0] === 'true' ? 'false' : 'true';
    const sql = `${r}.id = ANY(${p(ctx, values)})`;
    return modifier === 'not' ? `NOT (${sql})` : sql;
  }
  if (param === '_lastUpdated') {
    const conditions = values.map((v) => dateCondition(ctx, 'lu.last_updated', 'lu.last_updated', v)).join(' OR ');
    return `EXISTS (SELECT 1 FROM resource lu WHERE lu.resource_type = ${r}.resource_type AND lu.id = ${r}.id AND (${conditions}) OFFSET 0)`;
  }
  const def = searchParam(type, param)!;
  const table = tableOf(def.type);
  const x = alias(ctx, 'x');
  const exists = (condition: string) =>
    `EXISTS (SELECT 1 FROM ${table} ${x} WHERE ${x}.resource_type = ${r}.resource_type AND ${x}.id = ${r}.id AND ${x}.param = ${p(ctx, param)}${condition ? ` AND (${condition})` : ''} OFFSET 0)`;
  if (modifier === 'missing') return values[0] === 'true' ? `NOT ${exists('')}` : exists('');
  const conditions = values.map((v) => valueCondition(ctx, def.type, x, v, modifier));
  if (filter.allOf) return exists(conditions.join(' AND '));
  // `:not` matches resources with no matching value, including those without the element.
  if (modifier === 'not') return `NOT ${exists(conditions.join(' OR '))}`;
  return exists(conditions.join(' OR '));
}

function valueCondition(ctx: Ctx, type: string, x: string, value: string, modifier?: string): string {
  switch (type) {
    case 'token':
      return tokenCondition(ctx, x, value);
    case 'uri':
      if (modifier === 'below') return `${whole(x, 'code')} LIKE ${p(ctx, `${escapeLike(value)}%`)}`;
      if (modifier === 'above') return `${p(ctx, value)} LIKE (${whole(x, 'code')} || '%')`;
      return `${x}.code = ${p(ctx, indexKey(value))}`;
    case 'string':
      if (modifier === 'exact') return `${x}.exact = ${p(ctx, value)}`;
      if (modifier === 'contains') return `${whole(x, 'norm')} LIKE ${p(ctx, `%${escapeLike(normalizeString(value))}%`)}`;
      return prefixCondition(ctx, x, normalizeString(value));
    case 'reference':
      return referenceCondition(ctx, x, value, modifier);
    case 'date':
      return dateCondition(ctx, `${x}.low`, `${x}.high`, value);
    case 'composite':
      return compositeCondition(ctx, x, value);
    default:
      return 'false';
  }
}

/** `system|code`, `code`, `|code` (no system), `system|` (any code in system). */
function tokenCondition(ctx: Ctx, x: string, value: string): string {
  const bar = value.indexOf('|');
  // An absent system or code is stored as '' (migrations/008), which no search value names.
  if (value === '') return 'false';
  if (bar < 0) return `${x}.code = ${p(ctx, indexKey(value))}`;
  const system = value.slice(0, bar);
  const code = value.slice(bar + 1);
  if (system === '') return code === '' ? 'false' : `${x}.system = '' AND ${x}.code = ${p(ctx, indexKey(code))}`;
  if (code === '') return `${x}.system = ${p(ctx, indexKey(system))}`;
  return `${x}.system = ${p(ctx, indexKey(system))} AND ${x}.code = ${p(ctx, indexKey(code))}`;
}

/**
 * The whole value of a bounded column (index-key.ts): the `*_full` column where the indexed one
 * holds a key, else the indexed one. For prefix and substring matches, which a key cannot answer.
 */
function whole(x: string, column: 'code' | 'system' | 'norm'): string {
  return `COALESCE(${x}.${column}_full, ${x}.${column})`;
}

/**
 * FHIR string search's default match, "starts with" (R4 search.html#string), on the normalised
 * value. The indexed column is tested against the prefix as far as a key keeps it (its first 64
 * characters; `text_pattern_ops` serves that), the whole value against all of it.
 */
function prefixCondition(ctx: Ctx, x: string, norm: string): string {
  const lead = leadingChars(norm, PREFIX_CHARS);
  return `${x}.norm LIKE ${p(ctx, `${escapeLike(lead)}%`)} AND ${whole(x, 'norm')} LIKE ${p(ctx, `${escapeLike(norm)}%`)}`;
}

/** token$token: each side as a token (`code`, `system|code`, `|code`) against `system|code` pairs. */
function compositeCondition(ctx: Ctx, x: string, value: string): string {
  const [a, b] = value.split('$');
  if (b === undefined) return 'false';
  const side = (col: 'system' | 'code', v: string) => (v.includes('|') ? `${x}.${col} = ${p(ctx, indexKey(v))}` : `${whole(x, col)} LIKE ${p(ctx, `%|${escapeLike(v)}`)}`);
  return `${side('system', a)} AND ${side('code', b)}`;
}

/** `Type/id`, bare `id` (with an optional `:Type` modifier), or an absolute URL. */
function referenceCondition(ctx: Ctx, x: string, value: string, typeModifier?: string): string {
  const local = value.startsWith(`${ctx.baseUrl}/`) ? value.slice(ctx.baseUrl.length + 1) : value;
  if (/^https?:\/\//.test(local) || local.startsWith('urn:')) return `${x}.target_url = ${p(ctx, value)}`;
  const parsed = parseReference(local);
  if (parsed && local.includes('/')) return `${x}.target_type = ${p(ctx, indexKey(parsed.type))} AND ${x}.target_id = ${p(ctx, indexKey(parsed.id))}`;
  const typed = typeModifier ? ` AND ${x}.target_type = ${p(ctx, indexKey(typeModifier))}` : '';
  return `${x}.target_id = ${p(ctx, indexKey(local))}${typed}`;
}

/**
 * FHIR date prefixes with precision semantics (R4 search.html, prefixes): the search value is the
 * range its precision implies; eq = the target's range lies within it; gt = the target reaches
 * above it; ge = gt, or the target lies within it (since low <= high, `low >= search.low OR
 * high > search.high`), so a Period that only overlaps the search day from below is not `ge`
 * that day; le/lt mirror it; ap = within 10% of the distance to now.
 */
function dateCondition(ctx: Ctx, lowCol: string, highCol: string, raw: string): string {
  const [prefix, v] = splitDatePrefix(raw);
  const range = parseDateRange(v) as DateRange;
  const lo = () => `${p(ctx, toTimestamp(range.low))}::timestamptz`;
  const hi = () => `${p(ctx, toTimestamp(range.high))}::timestamptz`;
  switch (prefix) {
    case 'eq':
      return `(${lowCol} >= ${lo()} AND ${highCol} <= ${hi()})`;
    case 'ne':
      return `NOT (${lowCol} >= ${lo()} AND ${highCol} <= ${hi()})`;
    case 'gt':
      return `${highCol} > ${hi()}`;
    case 'lt':
      return `${lowCol} < ${lo()}`;
    case 'ge':
      return `(${lowCol} >= ${lo()} OR ${highCol} > ${hi()})`;
    case 'le':
      return `(${highCol} <= ${hi()} OR ${lowCol} < ${lo()})`;
    case 'sa':
      return `${lowCol} > ${hi()}`;
    case 'eb':
      return `${highCol} < ${lo()}`;
    case 'ap': {
      const delta = Math.max(Math.abs(ctx.now.getTime() - range.low) * 0.1, 86400000);
      return `(${lowCol} <= ${p(ctx, toTimestamp(range.high + delta))}::timestamptz AND ${highCol} >= ${p(ctx, toTimestamp(range.low - delta))}::timestamptz)`;
    }
    default:
      return 'false';
  }
}

function sortSql(ctx: Ctx, type: string, param: string, descending: boolean): string {
  const dir = descending ? 'DESC' : 'ASC';
  if (param === '_id') return `m.id ${dir}`;
  if (param === '_lastUpdated') return `(SELECT lu.last_updated FROM resource lu WHERE lu.resource_type = m.resource_type AND lu.id = m.id) ${dir}`;
  const def = searchParam(type, param)!;
  const agg = descending ? 'max' : 'min';
  const [table, col] =
    def.type === 'date'
      ? ['search_date', descending ? 's.high' : 's.low']
      : def.type === 'string'
        ? ['search_string', whole('s', 'norm')]
        : def.type === 'reference'
          ? ['search_reference', 's.target_url']
          : ['search_token', `NULLIF(${whole('s', 'code')}, '')`];
  return `(SELECT ${agg}(${col}) FROM ${table} s WHERE s.resource_type = m.resource_type AND s.id = m.id AND s.param = ${p(ctx, param)}) ${dir} NULLS LAST`;
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

async function loadIncludes(db: Db, opts: { scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'> }, request: SearchRequest, matches: readonly StoredMatch[]): Promise<Resource[]> {
  if (matches.length === 0 || (request.include.length === 0 && request.revinclude.length === 0)) return [];
  const ids = matches.map((m) => m.id);
  const seen = new Set(matches.map((m) => `${m.resourceType}/${m.id}`));
  const out: Resource[] = [];
  const run = async (spec: IncludeSpec, reverse: boolean) => {
    const ctx: Ctx = { params: [], scope: opts.scope, now: new Date(), baseUrl: '' };
    const join = reverse ? 'i.resource_type = x.resource_type AND i.id = x.id' : 'i.resource_type = x.target_type AND i.id = x.target_id';
    const match = reverse
      ? `x.resource_type = ${p(ctx, spec.type)} AND x.param = ${p(ctx, spec.param)} AND x.target_type = ${p(ctx, request.resourceType)} AND x.target_id = ANY(${p(ctx, ids)})`
      : `x.resource_type = ${p(ctx, spec.type)} AND x.param = ${p(ctx, spec.param)} AND x.id = ANY(${p(ctx, ids)})${spec.targetType ? ` AND x.target_type = ${p(ctx, spec.targetType)}` : ''}`;
    const { rows } = await db.query<{ content: Resource }>(
      `SELECT DISTINCT i.resource_type, i.id, i.content FROM search_reference x JOIN resource i ON ${join} WHERE ${match} AND NOT i.deleted ${andIf(scopeSql(ctx, 'i'))}`,
      ctx.params,
    );
    for (const row of rows) {
      const key = `${row.content.resourceType}/${row.content.id}`;
      if (!seen.has(key)) {
        seen.add(key);
        out.push(row.content);
      }
    }
  };
  for (const spec of request.include) await run(spec, false);
  for (const spec of request.revinclude) await run(spec, true);
  return out;
}
