import type { Bundle } from '@medplum/fhirtypes';
import { pathSegments } from '../model';
import { ANY_TYPE, type FhirReachPort, type Reach, type ReachRequest, type Route, type Runner } from '../common/fhir-reach';
import { isStoredType, searchParam, type SearchParamDef } from '../store';
import { parsedBody } from './body';
import { route } from './interactions';
import type { FhirEnv, FhirRequest } from './request';
import { parseSearch } from './search-request';
import { FHIR_REQUEST_JOB } from './operations/async';
import type { OperationRegistry } from './operations/registry';

/**
 * The FHIR layer's answer to the enforcement point (common/fhir-reach.ts): its own router and
 * parsers, so the guard judges a request as it will run; an operation's route carries the scopes
 * the operation declares; polling ids resolve through the job queue.
 */
export function fhirReachPort(env: FhirEnv): FhirReachPort {
  return {
    route: (method, path) => {
      try {
        const r = route({ method, path, query: [], headers: {} });
        // An operation this server does not have runs nothing: the FHIR layer answers 404 not-supported, whatever the scopes.
        if (r.interaction === 'operation' && !env.operations.find(r.operation!, r.type)) return undefined;
        return r;
      } catch {
        return undefined;
      }
    },
    reach: (req, r, runner) => reachOf(req, r, env.operations, runner),
    polledReach: async (id) => {
      const job = await env.jobs.find(id);
      return job ? reachOfJob(job.kind, job.payload, env.operations) : undefined;
    },
    parseBody: parsedBody,
  };
}

/**
 * A FHIR request job carries the request it runs (operations/async.ts): polling reaches what that
 * request reaches, query and body included. Other kinds name no request: they reach nothing more.
 * A polled request is never itself a poll: its async-status routes are left out.
 */
function reachOfJob(kind: string, payload: unknown, operations: OperationRegistry): Reach | undefined {
  const p = payload as Partial<FhirRequest> | null;
  if (kind !== FHIR_REQUEST_JOB || !p || typeof p.method !== 'string' || !Array.isArray(p.path)) return undefined;
  const query = Array.isArray(p.query) ? (p.query as [string, string][]) : [];
  const reach = reachOfStored({ method: p.method, path: p.path as string[], query, body: p.body }, operations);
  return reach && { ...reach, routes: reach.routes.filter((r) => r.interaction !== 'async-status') };
}


/**
 * The reach of a request already routed to `r` (an unroutable request runs nothing: the FHIR
 * layer answers 404/405/400), its operations' scopes from `operations`.
 */
export function reachOf(req: ReachRequest, r: Route, operations: OperationRegistry, runner: Runner = 'embedded'): Reach {
  const reach: Reach = { routes: [], searched: new Set(), included: new Set(), unfollowed: [] };
  follow(reach, req, r, false, { runner, operations });
  return reach;
}

/** Something the enforcement point cannot parse: nothing for our FHIR layer, everything for an upstream. */
function unparsable(reach: Reach, runner: Runner, what: string): void {
  if (runner === 'upstream') reach.unfollowed.push(what);
}

/** The reach of a stored request (an async job's payload); one that does not route reaches nothing it could run. */
function reachOfStored(req: ReachRequest, operations: OperationRegistry): Reach | undefined {
  try {
    return reachOf(req, route({ ...req, headers: {} }), operations);
  } catch {
    return undefined;
  }
}

interface Following {
  runner: Runner;
  operations: OperationRegistry;
}

function follow(reach: Reach, req: ReachRequest, r: Route, inBundle: boolean, f: Following): void {
  const { runner } = f;
  reach.routes.push(r.interaction === 'operation' ? withDeclaredScopes(r, f.operations) : r);
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
    follow(reach, entryReq, entryRoute, true, f);
  });
}

/**
 * An operation's route with the scopes its module declares (fhir/operations/); one this server
 * does not have, or plumbing with a route of its own, declares none and so needs everything.
 */
function withDeclaredScopes(r: Route, operations: OperationRegistry): Route {
  const op = operations.find(r.operation!, r.type);
  return op && !op.internal ? { ...r, scopes: op.scopes({ type: r.type, id: r.id }) } : r;
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
