import { ANY_TYPE, type Reach, type Route } from '../../../common/fhir-reach';

/**
 * POPP_REQUIRED_ROUTES entries: `*` (every request), `Patient` (every interaction on a type),
 * `Appointment/$book` (one operation on a type), `$op` (a system-level operation).
 */
export function requiresPopp(patterns: string[], r: Route): boolean {
  return patterns.some((p) => {
    if (p === '*') return true;
    const [type, op] = p.startsWith('$') ? [undefined, p.slice(1)] : p.split('/$');
    if (op !== undefined) return r.interaction === 'operation' && r.operation === op && r.type === type;
    return r.type === type;
  });
}

/**
 * A request needs a PoPP when anything it reaches does: the outer route, every Bundle entry, and
 * every type its searches return or filter on (`_include=Appointment:patient` reaches Patient, a
 * search of it). What the enforcement point cannot follow needs one wherever any route does.
 */
export function reachRequiresPopp(patterns: string[], reach: Reach): boolean {
  if (patterns.length === 0) return false;
  const reached = new Set([...reach.searched, ...reach.included]);
  if (reach.unfollowed.length || reached.has(ANY_TYPE)) return true;
  const searches = [...reached].map((type): Route => ({ interaction: 'search-type', type }));
  return [...reach.routes, ...searches].some((r) => requiresPopp(patterns, r));
}
