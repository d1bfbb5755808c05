/**
 * What the enforcement point needs to know about a FHIR request without knowing the FHIR layer:
 * the interaction it asks for (`Route`) and everything it reaches (`Reach`). The FHIR layer
 * implements `FhirReachPort` with its own router and parsers (fhir/request-reach.ts), so the
 * guard judges a request exactly as the FHIR layer will run it.
 */
import type { ScopeNeed } from './smart-scopes';

export type Interaction =
  | 'read'
  | 'vread'
  | 'history-instance'
  | 'search-type'
  | 'create'
  | 'update'
  | 'patch'
  | 'delete'
  | 'transaction'
  | 'batch'
  | 'operation'
  | 'async-status'
  | 'capabilities';

export interface Route {
  interaction: Interaction;
  type?: string;
  id?: string;
  versionId?: string;
  operation?: string;
  /**
   * The scopes an operation needs, as the operation itself declares them (the FHIR layer fills
   * them in); an operation without them needs every permission.
   */
  scopes?: readonly ScopeNeed[];
}

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

/** A request as far as its reach goes: path segments below the FHIR base, query pairs, parsed body. */
export interface ReachRequest {
  method: string;
  path: string[];
  query: [string, string][];
  body?: unknown;
}

/**
 * Who runs the request. `embedded`: our own FHIR layer, with the same parsers, so a query or
 * Bundle the enforcement point cannot parse runs nothing there (it answers 400) and needs no
 * scope. `upstream` (proxy mode, UPSTREAM_URL): another server that may read what we cannot, so
 * whatever we cannot parse fails closed.
 */
export type Runner = 'embedded' | 'upstream';

/** What the enforcement point asks the FHIR layer. */
export interface FhirReachPort {
  /** The interaction asked for; undefined when the FHIR layer refuses the request anyway (404/405/400: nothing runs). */
  route(method: string, path: string[]): Route | undefined;
  /** The reach of a request already routed to `route`. */
  reach(request: ReachRequest, route: Route, runner: Runner): Reach;
  /** What the request behind an async polling id reaches (its own polls left out); undefined: no such request. */
  polledReach(id: string): Promise<Reach | undefined>;
  /** The body as the FHIR layer parses it (by Content-Type), once per request (`key`). Throws when it cannot. */
  parseBody(key: object, contentType: string | undefined, text: string): unknown;
}
