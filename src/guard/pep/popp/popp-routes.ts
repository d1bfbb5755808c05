import type { Route } from '../../../fhir/interactions';

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
