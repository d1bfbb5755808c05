import type { OperationOutcomeIssue } from '@medplum/fhirtypes';
import { deepFreeze, Memo } from '../server-lib/frozen';
import { badRequest, issue } from '../server-lib/outcomes';
import { parseDateRange } from '../store';
import { searchParam, SPECIAL_PARAMS, type SearchParamDef } from '../store';
import { splitDatePrefix, type ChainLink, type Filter, type SearchRequest } from '../store';

export interface ParsedSearch {
  request: SearchRequest;
  /** Ignored parameters (lenient handling), reported back in the Bundle. */
  warnings: OperationOutcomeIssue[];
}

const DEFAULT_COUNT = 50;
const MAX_COUNT = 1000;

/** Result parameters that shape the response rather than filter it. */
const MAX_OFFSET = 2_147_483_647;

const IGNORED = new Set(['_format', '_pretty', '_count', '_offset', '_sort', '_include', '_revinclude']);

const SUMMARY_VALUES = new Set(['true', 'false', 'text', 'data', 'count']);
/** `_total`: every answer carries the accurate total, which satisfies each of these hints. */
const TOTAL_VALUES = new Set(['none', 'estimate', 'accurate']);

const TOKEN_MODIFIERS = new Set(['not', 'missing', 'text']);
const STRING_MODIFIERS = new Set(['exact', 'contains', 'missing']);

/** Distinct queries whose parse is remembered (a calendar asks the same few again and again). */
const PARSED_QUERIES = 2048;
/** Longer queries are parsed every time: the memo holds at most PARSED_QUERIES x this many characters of keys. */
const PARSED_QUERY_MAX_CHARS = 1024;

const parsed = new Memo<ParsedSearch>(PARSED_QUERIES);

/**
 * Parses FHIR search parameters (name/value pairs, repeats AND-ed, commas OR-ed) into a request.
 * Unknown parameters are ignored with a warning, or rejected with 400 when `strict`
 * (`Prefer: handling=strict`). The parse depends on nothing else: the same query (up to
 * PARSED_QUERY_MAX_CHARS) is parsed once, the enforcement point and the search sharing it, and
 * the answer is frozen, shared by every request that asks it.
 */
export function parseSearch(resourceType: string, pairs: readonly (readonly [string, string])[], strict = false): ParsedSearch {
  let key = `${resourceType}\u0001${strict ? 's' : 'l'}`;
  for (const [n, v] of pairs) key += `\u0001${n}\u0000${v}`;
  if (key.length > PARSED_QUERY_MAX_CHARS) return parseSearchAnew(resourceType, pairs, strict);
  return parsed.get(key, () => deepFreeze(parseSearchAnew(resourceType, pairs, strict)));
}

/** `parseSearch` for a query no other request will ask (one the clock completed): parsed for its caller alone, not remembered. */
export function parseSearchAnew(resourceType: string, pairs: readonly (readonly [string, string])[], strict = false): ParsedSearch {
  const warnings: OperationOutcomeIssue[] = [];
  const request: SearchRequest = {
    resourceType,
    filters: [],
    count: DEFAULT_COUNT,
    offset: 0,
    sort: [],
    include: [],
    revinclude: [],
    totalOnly: false,
  };
  // A sort or include the server cannot do is refused whatever the
  // handling; ignoring it would answer a differently ordered or shaped result than asked for.
  const unusable = (name: string, why: string) => {
    throw badRequest(`Unsupported search parameter ${name}: ${why}`, name, 'not-supported');
  };
  const unknown = (name: string, why: string) => {
    if (strict) throw badRequest(`Unknown or unsupported search parameter ${name}: ${why}`, name, 'not-supported');
    warnings.push(issue('not-supported', `Search parameter ${name} ignored: ${why}`, name, 'warning'));
  };

  for (const [rawName, value] of pairs) {
    const name = rawName.trim();
    const [base, modifier] = splitModifier(name);
    switch (base) {
      case '_count': {
        if (value === '') break;
        if (!/^\d+$/.test(value)) throw badRequest(`_count must be a non-negative integer, got "${value}"`, '_count');
        request.count = Math.min(Number(value), MAX_COUNT);
        if (request.count === 0) request.totalOnly = true;
        break;
      }
      case '_offset': {
        if (!/^\d+$/.test(value)) throw badRequest(`_offset must be a non-negative integer, got "${value}"`, '_offset');
        // Past any result set this store can hold, and past what the SQL OFFSET of every store
        // takes as a number: refused rather than silently clamped.
        if (Number(value) > MAX_OFFSET) throw badRequest(`_offset must be at most ${MAX_OFFSET}, got "${value}"`, '_offset');
        request.offset = Number(value);
        break;
      }
      case '_summary':
      case '_elements':
        subsetParam(request, base, value);
        break;
      case '_total':
        if (!TOTAL_VALUES.has(value)) throw badRequest(`_total must be one of none, estimate, accurate; got "${value}"`, '_total');
        break;
      case '_sort':
        for (const part of value.split(',').filter(Boolean)) {
          const descending = part.startsWith('-');
          const param = descending ? part.slice(1) : part;
          if (!SPECIAL_PARAMS.has(param) && !searchParam(resourceType, param)) unusable(`_sort=${param}`, `${resourceType} has no search parameter ${param}`);
          else request.sort.push({ param, descending });
        }
        break;
      case '_include':
      case '_revinclude': {
        const spec = parseInclude(value);
        const def = spec && searchParam(spec.type, spec.param);
        if (!spec || !def || def.type !== 'reference') {
          unusable(`${base}=${value}`, 'expected Type:reference-parameter[:TargetType]');
          break;
        }
        if (base === '_include' && spec.type !== resourceType) {
          unusable(`${base}=${value}`, `_include must start with ${resourceType}`);
          break;
        }
        (base === '_include' ? request.include : request.revinclude).push(spec);
        break;
      }
      default: {
        if (IGNORED.has(base)) break;
        if (name.startsWith('_has:')) {
          const filter = parseHas(name, value);
          if (typeof filter === 'string') unknown(name, filter);
          else request.filters.push(filter);
          break;
        }
        const filter = parseFilter(resourceType, name, value);
        if (typeof filter === 'string') unknown(name, filter);
        else request.filters.push(filter);
        void modifier;
      }
    }
  }
  request.filters = mergeDateRanges(request.filters);
  return { request, warnings };
}

/**
 * `start=ge..&start=le..` on one date parameter become one filter whose values all must hold for
 * the same value (a range, as HAPI reads it): one index probe per candidate instead of two.
 * Only single-valued repeats are merged; `a,b` alternatives stay separate filters.
 */
function mergeDateRanges(filters: Filter[]): Filter[] {
  const out: Filter[] = [];
  for (const f of filters) {
    const mergeable = !f.chain.length && !f.has && !f.modifier && f.values.length === 1 && f.kind === 'date';
    const target = mergeable ? out.find((o) => o.kind === 'date' && o.allOf && o.param === f.param && !o.chain.length && !o.has && !o.modifier) : undefined;
    if (target) target.values.push(...f.values);
    else out.push(mergeable ? { ...f, allOf: true, values: [...f.values] } : f);
  }
  return out;
}

function splitModifier(name: string): [string, string | undefined] {
  const i = name.indexOf(':');
  return i < 0 ? [name, undefined] : [name.slice(0, i), name.slice(i + 1)];
}

/** Values are comma-separated (OR); `\,` is a literal comma. */
function splitValues(value: string): string[] {
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < value.length; i++) {
    if (value[i] === '\\' && i + 1 < value.length) current += value[++i];
    else if (value[i] === ',') {
      out.push(current);
      current = '';
    } else current += value[i];
  }
  out.push(current);
  return out;
}

function parseInclude(value: string): { type: string; param: string; targetType?: string } | undefined {
  const parts = value.split(':');
  if (parts.length < 2 || parts.length > 3) return undefined;
  return { type: parts[0], param: parts[1], targetType: parts[2] };
}

/**
 * `name` may be a chain: `schedule.actor:HealthcareService.type`. Returns the filter or the
 * reason it cannot be served.
 */
function parseFilter(resourceType: string, name: string, value: string): Filter | string {
  const links = name.split('.');
  const chain: ChainLink[] = [];
  let type = resourceType;
  for (let i = 0; i < links.length - 1; i++) {
    const [param, targetType] = splitModifier(links[i]);
    const def = searchParam(type, param);
    if (!def) return `${type} has no search parameter ${param}`;
    if (def.type !== 'reference') return `${param} is not a reference parameter and cannot be chained`;
    const next = targetType ?? (def.target.length === 1 ? def.target[0] : undefined);
    if (!next) return `chain through ${param} needs a target type (${param}:Type)`;
    if (def.target.length && !def.target.includes(next)) return `${param} cannot refer to ${next}`;
    chain.push({ param, targetType: next });
    type = next;
  }
  const [param, modifier] = splitModifier(links[links.length - 1]);
  const problem = checkParam(type, param, modifier, value);
  if (problem) return problem;
  return { chain, param, modifier, values: splitValues(value), kind: param === '_lastUpdated' ? 'special' : searchParam(type, param)?.type };
}

/** `_has:Appointment:slot:status=booked` (nested _has not supported). */
function parseHas(name: string, value: string): Filter | string {
  const parts = name.split(':');
  if (parts.length !== 4) return 'expected _has:Type:reference-parameter:parameter';
  const [, type, refParam, param] = parts;
  const refDef = searchParam(type, refParam);
  if (!refDef || refDef.type !== 'reference') return `${type} has no reference parameter ${refParam}`;
  const [p, modifier] = splitModifier(param);
  const problem = checkParam(type, p, modifier, value);
  if (problem) return problem;
  return { chain: [], has: { type, param: refParam }, param: p, modifier, values: splitValues(value) };
}

/** A reason the parameter cannot be served, or undefined; malformed values throw 400. */
function checkParam(type: string, param: string, modifier: string | undefined, value: string): string | undefined {
  if (param === '_id') return modifier && modifier !== 'not' && modifier !== 'missing' ? `modifier :${modifier} not supported on _id` : undefined;
  if (param === '_lastUpdated') {
    if (modifier) return `modifier :${modifier} not supported on _lastUpdated`;
    for (const v of splitValues(value)) checkDateValue(param, v);
    return undefined;
  }
  const def: SearchParamDef | undefined = searchParam(type, param);
  if (!def) return `${type} has no search parameter ${param}`;
  if (modifier === 'missing') {
    if (value !== 'true' && value !== 'false') throw badRequest(`:missing takes true or false, got "${value}"`, param);
    return undefined;
  }
  switch (def.type) {
    case 'token':
      if (modifier && (!TOKEN_MODIFIERS.has(modifier) || modifier === 'text')) return `modifier :${modifier} not supported on token ${param}`;
      return undefined;
    case 'uri':
      if (modifier && modifier !== 'below' && modifier !== 'above') return `modifier :${modifier} not supported on uri ${param}`;
      return undefined;
    case 'string':
      if (modifier && !STRING_MODIFIERS.has(modifier)) return `modifier :${modifier} not supported on string ${param}`;
      return undefined;
    case 'reference':
      // A type modifier (`actor:Practitioner=id`) restricts the target type.
      if (modifier && !/^[A-Z][A-Za-z]+$/.test(modifier)) return `modifier :${modifier} not supported on reference ${param}`;
      return undefined;
    case 'date':
      if (modifier) return `modifier :${modifier} not supported on date ${param}`;
      for (const v of splitValues(value)) checkDateValue(param, v);
      return undefined;
    case 'composite':
      if (def.components?.length !== 2) return `composite ${param} not supported`;
      return undefined;
    default:
      return `${def.type} parameters are not supported`;
  }
}


function checkDateValue(param: string, value: string): void {
  const [, v] = splitDatePrefix(value);
  if (!parseDateRange(v)) throw badRequest(`Invalid date "${value}" for ${param}: expected [prefix]YYYY[-MM[-DD[Thh:mm[:ss[.sss]][Z|+hh:mm]]]]`, param);
}

/** How a returned resource is cut down: `_summary` (`count` only in a search) and `_elements`. */
export type Subsetting = Pick<SearchRequest, 'summary' | 'elements'> & { totalOnly?: boolean };

function subsetParam(request: Subsetting, name: '_summary' | '_elements', value: string): void {
  if (name === '_summary') {
    if (!SUMMARY_VALUES.has(value)) throw badRequest(`_summary must be one of true, false, text, data, count; got "${value}"`, '_summary');
    if (value === 'count') request.totalOnly = true;
    else if (value !== 'false') request.summary = value as 'true' | 'text' | 'data';
    return;
  }
  const names = value.split(',').map((n) => n.trim()).filter(Boolean);
  const bad = names.find((n) => !/^[a-z][A-Za-z0-9]*$/.test(n));
  if (bad !== undefined) throw badRequest(`_elements takes top-level element names, got "${bad}"`, '_elements');
  request.elements = [...(request.elements ?? []), ...names];
}

/** `_summary` and `_elements` of a read or vread (R4 search.html 3.1.1.5.8/9 apply to reads too); `count` is for searches. */
export function parseSubsetting(query: [string, string][]): Subsetting {
  const out: Subsetting = {};
  for (const [name, value] of query) if (name === '_summary' || name === '_elements') subsetParam(out, name, value);
  if (out.totalOnly) throw badRequest('_summary=count applies to searches only', '_summary');
  return out;
}
