import type { Bundle } from '@medplum/fhirtypes';
import { pathSegments } from '../../model';
import { route, type Route } from '../../fhir/interactions';
import type { FhirRequest } from '../../fhir/request';
import { isStoredType, searchParam, type SearchParamDef } from '../../store';
import { parseSearch } from '../../fhir/search-request';

/** A type the enforcement point cannot name: it stands for every type (`system/*`). */
export const ANY_TYPE = '*';

/**
 * Everything one request may touch, as the FHIR layer will run it: the scope check and the PoPP
 * check both judge this, never the outer route alone.
 */
export interface Reach {
  /** The interactions that run: the request's own, and each entry's of a transaction or batch Bundle. */
  routes: Route[];
  /** Types a search finds or filters on besides its own: `_revinclude`, `_has`, chains (SMART `s`). */
  searched: Set<string>;
  /** Types a search returns by following its matches' references, `_include` (for PoPP; the FHIR layer returns only those the token may read). */
  included: Set<string>;
  /** What the enforcement point cannot follow (an entry it cannot route, a nested Bundle, a query it cannot parse): fail closed. */
  unfollowed: string[];
}

export type ReachRequest = Pick<FhirRequest, 'method' | 'path' | 'query' | 'body'>;

/**
 * Who runs the request. `embedded`: our own FHIR layer, with the same parsers, so a query or
 * Bundle the enforcement point cannot parse runs nothing there (it answers 400) and needs no
 * scope. `upstream` (proxy mode, UPSTREAM_URL): another server that may read what we cannot, so
 * whatever we cannot parse fails closed.
 */
export type Runner = 'embedded' | 'upstream';

/** The reach of a request already routed to `r` (an unroutable request runs nothing: the FHIR layer answers 404/405/400). */
export function reachOf(req: ReachRequest, r: Route, runner: Runner = 'embedded'): Reach {
  const reach: Reach = { routes: [], searched: new Set(), included: new Set(), unfollowed: [] };
  follow(reach, req, r, false, runner);
  return reach;
}

/** Something the enforcement point cannot parse: nothing for our FHIR layer, everything for an upstream. */
function unparsable(reach: Reach, runner: Runner, what: string): void {
  if (runner === 'upstream') reach.unfollowed.push(what);
}

/** The reach of a stored request (an async job's payload); one that does not route reaches nothing it could run. */
export function reachOfStored(req: ReachRequest): Reach | undefined {
  try {
    return reachOf(req, route({ ...req, headers: {} }));
  } catch {
    return undefined;
  }
}

function follow(reach: Reach, req: ReachRequest, r: Route, inBundle: boolean, runner: Runner): void {
  reach.routes.push(r);
  if (r.interaction === 'search-type') searchReach(reach, r.type!, req.query, runner);
  if (r.interaction !== 'transaction' && r.interaction !== 'batch') return;
  // The FHIR layer refuses a Bundle inside a Bundle (fhir/transaction.ts); should it ever run one, it needs everything.
  if (inBundle) return void reach.unfollowed.push('a Bundle nested in a Bundle');
  const bundle = req.body as Bundle | undefined;
  if (!bundle || typeof bundle !== 'object' || bundle.resourceType !== 'Bundle' || !Array.isArray(bundle.entry)) return unparsable(reach, runner, 'the Bundle cannot be read');
  bundle.entry.forEach((entry, i) => {
    const entryReq = entryRequest(entry?.request?.method, entry?.request?.url, entry?.resource);
    let entryRoute: Route | undefined;
    try {
      entryRoute = entryReq && route({ ...entryReq, headers: {} });
    } catch {
      entryRoute = undefined;
    }
    if (!entryReq || !entryRoute) return void reach.unfollowed.push(`Bundle.entry[${i}] cannot be routed`);
    follow(reach, entryReq, entryRoute, true, runner);
  });
}

/** An entry as fhir/transaction.ts builds it: path and query from `request.url`, body the entry's resource. */
function entryRequest(method: unknown, url: unknown, resource: unknown): ReachRequest | undefined {
  if (typeof method !== 'string' || typeof url !== 'string' || !method || !url) return undefined;
  try {
    const u = new URL(url, 'http://entry.invalid/');
    return { method, path: pathSegments(u.pathname), query: [...u.searchParams.entries()], body: resource };
  } catch {
    return undefined;
  }
}

/**
 * The types a search reaches through its query, read by the store's own parser (lenient: what it
 * ignores never runs; what it accepts is a superset of what strict handling accepts). A query it
 * refuses runs nothing in our FHIR layer, which answers the same 400.
 */
function searchReach(reach: Reach, type: string, query: [string, string][], runner: Runner): void {
  let request;
  try {
    request = parseSearch(type, query).request;
  } catch {
    return unparsable(reach, runner, `the search on ${type} cannot be parsed`);
  }
  for (const f of request.filters) {
    for (const link of f.chain) reach.searched.add(link.targetType ?? ANY_TYPE);
    if (f.has) reach.searched.add(f.has.type);
  }
  // A chain the parser refuses (untyped over a multi-target reference) never runs; its types count anyway, should it ever.
  for (const [name] of query) if (!name.startsWith('_') && name.includes('.')) for (const t of chainTargets(type, name)) reach.searched.add(t);
  for (const inc of request.include) for (const t of includeTargets(inc.type, inc.param, inc.targetType)) reach.included.add(t);
  for (const rev of request.revinclude) reach.searched.add(rev.type);
}

/**
 * `_include=Appointment:patient` returns Patients; without a `:Type` suffix every target of the
 * reference parameter may come back. Only stored types can (the store holds nothing else); a
 * parameter without declared targets could return anything.
 */
function includeTargets(type: string, param: string, targetType: string | undefined): string[] {
  if (targetType) return [targetType];
  const targets = (searchParam(type, param)?.target ?? []).filter(isStoredType);
  return targets.length ? targets : [ANY_TYPE];
}

/** `schedule.actor.name` on Slot: Schedule, then every stored target of Schedule.actor; a link past a multi-target one: any type. */
function chainTargets(type: string, name: string): string[] {
  const out: string[] = [];
  let current: string | undefined = type;
  for (const link of name.split('.').slice(0, -1)) {
    if (current === undefined) {
      out.push(ANY_TYPE); // past a multi-target link: any type may follow
      break;
    }
    const [param, typed] = link.split(':');
    const def: SearchParamDef | undefined = searchParam(current, param);
    if (!def || def.type !== 'reference') break;
    const targets: string[] = typed ? [typed] : def.target.filter(isStoredType);
    out.push(...(targets.length ? targets : [ANY_TYPE]));
    current = targets.length === 1 ? targets[0] : undefined;
  }
  return out;
}
