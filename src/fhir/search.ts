import { r4Definitions } from '../server-lib/r4-definitions';
import type { Bundle, BundleEntry, OperationOutcomeIssue, Resource, StructureDefinition } from '@medplum/fhirtypes';
import type { SearchRequest, SearchResult } from '../store';
import { builtOnce } from './shared-answers';
import { storedEntry } from './stored-json';
import { parseSearch, parseSearchAnew, type ParsedSearch } from './search-request';
import { scopeCovered } from '../common/smart-scopes';
import { scopeContextOf } from '../common/identity';
import { issue, outcome, unprocessable } from '../server-lib/outcomes';
import { preferHeader, type FhirEnv, type FhirRequest, type Caller } from './request';

/**
 * ISiK search rules on top of generic FHIR search (ISiK Terminplanung CapabilityStatement,
 * ISiK Terminplanung 6.0.0): Slot `status` only together with `schedule` (else 422), and `schedule`
 * without `start` means from now on.
 */
function applyIsikRules(type: string, pairs: [string, string][], now: Date): [string, string][] {
  if (type !== 'Slot') return pairs;
  const names = new Set(pairs.map(([n]) => n.split(':')[0].split('.')[0]));
  if (names.has('status') && !names.has('schedule')) {
    throw unprocessable('Slot search by status needs a schedule parameter (ISiK: Slot?schedule=...&status=free)', 'Slot.status', 'too-costly');
  }
  if (names.has('schedule') && !names.has('start')) return [...pairs, ['start', `ge${now.toISOString()}`]];
  return pairs;
}

export function parseFhirSearch(type: string, req: FhirRequest, now: Date): ParsedSearch {
  const strict = preferHeader(req).handling === 'strict';
  const pairs = applyIsikRules(type, req.query, now);
  // A query the clock completed (`schedule` without `start`) is not asked twice: kept out of the shared parses.
  return pairs === req.query ? parseSearch(type, pairs, strict) : parseSearchAnew(type, pairs, strict);
}

/** Type-level search: a `searchset` Bundle with total, self/next/previous links, includes, warnings. */
export async function searchType(type: string, req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  const { request, warnings } = parseFhirSearch(type, req, env.ctx.now());
  const result = await env.repo.search(request, req.caller);
  // A result the window cache shares: the Bundle is the same for every request of this shape.
  return builtOnce(result, () => answerShape(type, req, env, result.included.length > 0), () => searchsetBundle(type, req, env, request, warnings, result));
}

/** Everything of a request the searchset Bundle is built from, besides the result. */
function answerShape(type: string, req: FhirRequest, env: FhirEnv, includes: boolean): string {
  return JSON.stringify([type, env.baseUrl, req.query, preferHeader(req).handling ?? '', includes && req.caller ? [scopeContextOf(req.caller), req.caller.scopes] : null]);
}

function searchsetBundle(type: string, req: FhirRequest, env: FhirEnv, request: SearchRequest, parseWarnings: readonly OperationOutcomeIssue[], result: SearchResult): Bundle {
  const warnings = [...parseWarnings];
  const included = result.included.filter((r) => mayRead(req.caller, r.resourceType));
  if (included.length < result.included.length) {
    const types = [...new Set(result.included.filter((r) => !included.includes(r)).map((r) => r.resourceType))].sort();
    warnings.push(issue('forbidden', `Included resources left out: the access token has no read scope for ${types.join(', ')}`, undefined, 'warning'));
  }
  // Matches go out as stored unless `_summary`/`_elements` cut them down.
  const whole = !request.summary && !request.elements?.length;
  const entry: BundleEntry[] = [
    ...result.matches.map((m, i) =>
      whole
        ? storedEntry(`${env.baseUrl}/${m.resourceType}/${m.id}`, m.json, () => result.resources[i], { mode: 'match' })
        : { fullUrl: fullUrl(env, result.resources[i]), resource: subset(result.resources[i], request), search: { mode: 'match' as const } },
    ),
    ...included.map((r) => ({ fullUrl: fullUrl(env, r), resource: r, search: { mode: 'include' as const } })),
  ];
  if (warnings.length) entry.push({ resource: outcome(warnings), search: { mode: 'outcome' } });
  const base = `${env.baseUrl}/${type}`;
  const link: Bundle['link'] = [{ relation: 'self', url: pageUrl(base, req.query, request.offset) }];
  if (!request.totalOnly && request.offset + request.count < result.total) {
    link.push({ relation: 'next', url: pageUrl(base, req.query, request.offset + request.count) });
  }
  if (request.offset > 0) link.push({ relation: 'previous', url: pageUrl(base, req.query, Math.max(0, request.offset - request.count)) });
  return { resourceType: 'Bundle', type: 'searchset', total: result.total, link, entry };
}

/**
 * `_include`/`_revinclude` return only what the caller's token may read (SMART `r`): an include
 * the ISiK CapabilityStatement lists (`Appointment:actor`) works for every requestor, and brings
 * the actor types its scopes cover. Without a caller (guard off, the repository itself): all.
 */
function mayRead(caller: Caller | undefined, type: string): boolean {
  return !caller || scopeCovered(`${scopeContextOf(caller)}/${type}.r`, caller.scopes);
}

export function fullUrl(env: FhirEnv, r: Resource): string {
  return `${env.baseUrl}/${r.resourceType}/${r.id}`;
}

function pageUrl(base: string, query: [string, string][], offset: number): string {
  const params = new URLSearchParams(query.filter(([n]) => n !== '_offset'));
  if (offset > 0) params.set('_offset', String(offset));
  const qs = params.toString();
  return qs ? `${base}?${qs}` : base;
}

/** R4 search.html `_summary`/`_elements`: a resource returned with elements left out says so. */
const SUBSETTED = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };

interface TopLevel {
  summary: Set<string>;
  mandatory: Set<string>;
}
let topLevel: Map<string, TopLevel> | undefined;

/** Top-level elements of each R4 resource marked isSummary, and those with min >= 1 (R4 definitions). */
function topLevelOf(type: string): TopLevel {
  if (!topLevel) {
    topLevel = new Map();
    const bundle = r4Definitions<Bundle<StructureDefinition>>('fhir/r4/profiles-resources.json');
    for (const e of bundle.entry ?? []) {
      const sd = e.resource;
      if (sd?.kind !== 'resource' || !sd.type) continue;
      const t: TopLevel = { summary: new Set(), mandatory: new Set() };
      for (const el of sd.snapshot?.element ?? []) {
        const parts = el.path?.split('.') ?? [];
        if (parts.length !== 2) continue;
        const name = parts[1].replace(/\[x\]$/, '');
        if (el.isSummary) t.summary.add(name);
        if ((el.min ?? 0) > 0) t.mandatory.add(name);
      }
      topLevel.set(sd.type, t);
    }
  }
  return topLevel.get(type) ?? { summary: new Set(), mandatory: new Set() };
}

/** `valueString` and `_valueString` belong to element `value[x]`; `_status` to `status`. */
function elementOf(key: string, names: Set<string>): string | undefined {
  const k = key.startsWith('_') ? key.slice(1) : key;
  if (names.has(k)) return k;
  for (const n of names) if (k.startsWith(n) && /^[A-Z]/.test(k.slice(n.length))) return n;
  return undefined;
}

/**
 * A match cut down per `_summary` / `_elements` (R4 search.html 3.1.1.5.8-9): `true` keeps the
 * summary elements, `text` text plus mandatory elements, `data` drops text; `_elements` keeps the
 * listed top-level elements plus the mandatory ones (R4: servers SHOULD return those). id and meta
 * always stay, and meta.tag gains SUBSETTED.
 */
export function subset(resource: Resource, request: Pick<SearchRequest, 'summary' | 'elements'>): Resource {
  if (!request.summary && !request.elements?.length) return resource;
  const defs = topLevelOf(resource.resourceType);
  let keep: Set<string> | undefined;
  if (request.summary === 'true') keep = new Set(defs.summary);
  else if (request.summary === 'text') keep = new Set(['text', ...defs.mandatory]);
  if (request.elements?.length) {
    const listed = new Set([...request.elements, ...defs.mandatory]);
    keep = keep ? new Set([...keep].filter((n) => listed.has(n))) : listed;
  }
  const drop = request.summary === 'data' ? new Set(['text']) : new Set<string>();
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) {
    if (key === 'resourceType' || key === 'id' || key === 'meta') {
      out[key] = value;
      continue;
    }
    const name = elementOf(key, keep ?? new Set(Object.keys(resource).map((k) => k.replace(/^_/, ''))));
    if (name !== undefined && !drop.has(name)) out[key] = value;
  }
  const meta = resource.meta ?? {};
  const tag = [...(meta.tag ?? []).filter((t) => !(t.system === SUBSETTED.system && t.code === SUBSETTED.code)), SUBSETTED];
  return { ...(out as unknown as Resource), meta: { ...meta, tag } };
}
