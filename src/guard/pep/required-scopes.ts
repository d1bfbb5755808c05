import type { Bundle } from '@medplum/fhirtypes';
import { route, type Route } from '../../fhir/interactions';
import type { FhirRequest } from '../../fhir/request';
import { scopeCovered } from '../policy/scopes';

/** SMART v2 permissions (CONTRACT section 4: `system/Appointment.crus`). */
export type Permission = 'c' | 'r' | 'u' | 'd' | 's';

/** `system/<type>.<permission>`; type `*` only for system-level operations nobody but owners may call. */
export type ScopeNeed = `system/${string}.${Permission}`;

const need = (type: string, p: Permission): ScopeNeed => `system/${type}.${p}`;
const ALL: Permission[] = ['c', 'r', 'u', 'd', 's'];

/**
 * What each operation needs. An operation missing here needs every permission on its type (or
 * `system/*` at system level): new operations are closed until someone decides their scope.
 */
const OPERATIONS: Record<string, (r: Route) => ScopeNeed[]> = {
  // ISiK Terminplanung: $book creates an Appointment (a re-booking cancels one of the caller's own, checked by the booking).
  book: () => [need('Appointment', 'c')],
  // Subscriptions backport: $status / $events read the caller's own Subscription(s).
  status: (r) => [need('Subscription', r.id ? 'r' : 's')],
  events: (r) => [need('Subscription', r.id ? 'r' : 's')],
};

/**
 * Issue 6 point 2: the scopes one FHIR interaction needs. Reads, versions and history need `r`,
 * searches `s`, create `c`, update and patch `u`, delete `d`; transaction and batch Bundles the
 * scopes of all their entries (`bundle`); the capability statement none. Async polling
 * (`_async/{id}`) needs what the polled request needed (`polled`: the job that runs it).
 */
export function scopesFor(r: Route, more: { bundle?: unknown; polled?: PolledJob } = {}): ScopeNeed[] {
  switch (r.interaction) {
    case 'capabilities':
      return [];
    case 'read':
    case 'vread':
    case 'history-instance':
      return [need(r.type!, 'r')];
    case 'search-type':
      return [need(r.type!, 's')];
    case 'create':
      return [need(r.type!, 'c')];
    case 'update':
    case 'patch':
      return [need(r.type!, 'u')];
    case 'delete':
      return [need(r.type!, 'd')];
    case 'operation':
      return operationScopes(r);
    case 'async-status':
      return more.polled ? pollScopes(more.polled) : [];
    case 'transaction':
    case 'batch':
      return bundleScopes(more.bundle, 0);
  }
}

function operationScopes(r: Route): ScopeNeed[] {
  const known = OPERATIONS[r.operation ?? ''];
  if (known) return known(r);
  return ALL.map((p) => need(r.type ?? '*', p));
}

/** An async job (`async_job`): its kind and payload. */
export interface PolledJob {
  kind: string;
  payload: unknown;
}

/**
 * A `fhir-request` job carries the FHIR request it runs (fhir/operations/async.ts): polling needs
 * that request's scopes. Other kinds name no request; the job's owner check is all there is.
 */
function pollScopes(job: PolledJob): ScopeNeed[] {
  const p = job.payload as Partial<FhirRequest> | null;
  if (job.kind !== 'fhir-request' || !p || typeof p.method !== 'string' || !Array.isArray(p.path)) return [];
  try {
    return scopesFor(route({ method: p.method, path: p.path as string[], query: [], headers: {} }));
  } catch {
    return [];
  }
}

/** Union of the entries' scopes; nested Bundles (a batch may carry one) count too. */
function bundleScopes(body: unknown, depth: number): ScopeNeed[] {
  const bundle = body as Bundle | undefined;
  if (!bundle || bundle.resourceType !== 'Bundle' || depth > 3) return [];
  const needs = new Set<ScopeNeed>();
  for (const entry of bundle.entry ?? []) {
    const method = entry.request?.method;
    const url = entry.request?.url;
    if (!method || !url) continue;
    let r: Route;
    try {
      r = route(entryRequest(method, url));
    } catch {
      continue; // the FHIR layer refuses this entry before anything runs
    }
    const nested = r.interaction === 'transaction' || r.interaction === 'batch' ? bundleScopes(entry.resource, depth + 1) : scopesFor(r);
    for (const n of nested) needs.add(n);
  }
  return [...needs];
}

function entryRequest(method: string, url: string): FhirRequest {
  const u = new URL(url, 'http://entry.invalid/');
  return { method, path: u.pathname.split('/').filter(Boolean).map(decodeURIComponent), query: [], headers: {} };
}

/** The needs the granted scopes do not cover (SMART v2: `system/*.cruds` covers all). */
export function missingScopes(needs: ScopeNeed[], granted: string[]): ScopeNeed[] {
  return needs.filter((n) => !scopeCovered(n, granted));
}
