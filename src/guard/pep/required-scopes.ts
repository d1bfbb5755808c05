import { ANY_TYPE, type Reach, type Route } from '../../common/fhir-reach';
import { scopeCovered, scopeNeed as need, type Permission, type ScopeContext, type ScopeNeed } from '../../common/smart-scopes';

const ALL: Permission[] = ['c', 'r', 'u', 'd', 's'];

/**
 * The scopes a request needs, from its reach (request-reach.ts): every
 * interaction that runs (a transaction's or batch's entries included), `s` on every type its
 * searches reach through `_revinclude`, `_has` and chains (what `_include` returns the FHIR layer
 * cuts down to the types the token may read, fhir/search.ts), and every permission on
 * every type (`system/*.cruds`) when the reach has anything the enforcement point cannot follow.
 * Async polling (`_async/{id}`) needs what the polled request needed (`polled`: what it reaches).
 */
export function requiredScopes(reach: Reach, more: { polled?: Reach } = {}): ScopeNeed[] {
  const needs = new Set<ScopeNeed>();
  for (const r of reach.routes) for (const n of r.interaction === 'async-status' ? (more.polled ? requiredScopes(more.polled) : []) : scopesFor(r)) needs.add(n);
  for (const type of reach.searched) needs.add(need(type, 's'));
  if (reach.unfollowed.length) for (const p of ALL) needs.add(need(ANY_TYPE, p));
  return [...needs];
}

/**
 * The scopes one FHIR interaction needs by its route alone. Reads, versions and history need `r`,
 * searches `s`, create `c`, update and patch `u`, delete `d`; the capability statement none. A
 * transaction or batch needs what its entries need (`requiredScopes`), and async polling what
 * the polled request needs: neither is known from the route, so alone they need everything.
 */
function scopesFor(r: Route): ScopeNeed[] {
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
    case 'transaction':
    case 'batch':
      return [];
  }
}

/**
 * An operation needs what it declares itself (its module in the FHIR layer, handed over with the
 * route); one that declares nothing needs every permission on its type (or `system/*` at system
 * level): it stays closed until someone decides its scope.
 */
function operationScopes(r: Route): ScopeNeed[] {
  if (r.scopes) return [...r.scopes];
  return ALL.map((p) => need(r.type ?? ANY_TYPE, p));
}

/**
 * The needs the granted scopes do not cover (SMART v2: `system/*.cruds` covers all), in the
 * caller's context: a patient's needs are `patient/` scopes (`patient/Appointment.r`).
 */
export function missingScopes(needs: ScopeNeed[], granted: string[], context: ScopeContext = 'system'): string[] {
  return needs.map((n) => (context === 'system' ? n : `${context}/${n.slice('system/'.length)}`)).filter((n) => !scopeCovered(n, granted));
}
