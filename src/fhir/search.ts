import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import { parseSearch, type ParsedSearch } from '../store/search/request';
import { outcome, unprocessable } from './outcomes';
import { preferHeader, scopeOf, type FhirEnv, type FhirRequest } from './request';

/**
 * ISiK search rules on top of generic FHIR search (ISiK Terminplanung CapabilityStatement,
 * scheduling.md 1.7): Slot `status` only together with `schedule` (else 422), and `schedule`
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
  return parseSearch(type, applyIsikRules(type, req.query, now), strict);
}

/** Type-level search: a `searchset` Bundle with total, self/next/previous links, includes, warnings. */
export async function searchType(type: string, req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  const { request, warnings } = parseFhirSearch(type, req, env.ctx.now());
  const result = await env.repo.search(request, scopeOf(req.identity));
  const entry: BundleEntry[] = [
    ...result.resources.map((r) => ({ fullUrl: fullUrl(env, r), resource: r, search: { mode: 'match' as const } })),
    ...result.included.map((r) => ({ fullUrl: fullUrl(env, r), resource: r, search: { mode: 'include' as const } })),
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

export function fullUrl(env: FhirEnv, r: Resource): string {
  return `${env.baseUrl}/${r.resourceType}/${r.id}`;
}

function pageUrl(base: string, query: [string, string][], offset: number): string {
  const params = new URLSearchParams(query.filter(([n]) => n !== '_offset'));
  if (offset > 0) params.set('_offset', String(offset));
  const qs = params.toString();
  return qs ? `${base}?${qs}` : base;
}
