import type { FhirReachPort, Reach, ReachRequest, Route } from '../../common/fhir-reach';
import { scopeContextOf, type Caller } from '../../common/identity';
import type { ScopeContext } from '../../common/smart-scopes';
import { MalformedUrl, pathSegments, queryPairs } from '../../model';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';
import { InvalidRequest } from '../errors';
import type { SharedState } from '../state/shared-state';
import { accessTokenFrom } from './access-token-credentials';
import { InsufficientScope } from './errors';
import { CLIENT_DATA, clientDataHeader, POPP_CONTENT, poppContentHeader, USER_INFO, userInfoHeader } from './forwarded-headers';
import { auditPartiesOf, logHash, callerOf } from './caller';
import type { AuditParties } from '../../server-lib/audit-port';
import type { PoppJwks } from './popp/popp-jwks';
import { reachRequiresPopp } from './popp/popp-routes';
import { verifyPopp, type VerifiedPopp } from './popp/verify-popp';
import { clientBucket, withinRateLimit } from './rate-limit-per-client';
import { recordRequest } from './request-ledger';
import { missingScopes, requiredScopes } from './required-scopes';
import type { PepSettings } from './settings';
import type { AccessTokenVerifier } from '../authserver/tokens/verify-access-token';
import type { Es256KeyCache } from '../jose/es256';
import { proofIsFresh, replayWindowEnd, verifyRequestProof } from './verify-request-proof';

/**
 * A request to the protected FHIR API as the enforcement point sees it, whatever carried it (an
 * HTTP request through Express, an inner request of the encryption layer).
 */
export interface ResourceRequest {
  method: string;
  /** The path below the FHIR base as received, e.g. `/Appointment/$book`. */
  path: string;
  /** Path and query as received below the server root (`/fhir/Slot?x=1`): DPoP `htu`, query pairs. */
  originalUrl: string;
  headers: {
    /** Every Authorization header sent (a second one is refused). */
    authorization?: string | readonly string[];
    /** Every DPoP header sent (a second one is refused). */
    dpop?: string[];
    /** Every PoPP header sent. */
    popp?: string[];
    contentType?: string;
  };
  /** The body as UTF-8 text, read once on demand; undefined when it is not UTF-8. May throw a guard error (413). */
  bodyText(): Promise<string | undefined>;
  /** What carried the request (the Express request): per-request caches (a parsed Bundle) are keyed by it. */
  readonly carrier: object;
}

/** What an admitted request carries on: its caller, and the identity headers for the application. */
export interface Decision {
  caller: Caller;
  /** The caller as the audit trail names them. */
  parties: AuditParties;
  /** Headers to add to the request (ZETA: user info, client data, PoPP content). */
  forward: Record<string, string>;
}

/** Written as the checks go, for the answer whatever it is: rate-limit headers, the log's client hash. */
export interface Trace {
  responseHeaders: Record<string, string>;
  clientHash?: string;
  /** Who the token speaks for, once it is verified: the audit trail names them on a refusal too. */
  parties?: AuditParties;
}

export interface EnforcementDeps {
  settings: PepSettings;
  now: () => Date;
  repositoryOwners: readonly string[];
  tokens: AccessTokenVerifier;
  proofKeys: Es256KeyCache;
  state: SharedState;
  fhir: FhirReachPort;
  popp?: PoppJwks;
  /** Per verified token: what every request presenting it yields (computed once). */
  facts: WeakMap<AccessTokenPayload, TokenFacts>;
}

/** What a verified token yields for every request that presents it. */
export interface TokenFacts {
  clientHash: string;
  bucket: string;
  scopes: string[];
  userInfo: string;
  clientData: string;
  caller: Caller;
  parties: AuditParties;
}

/**
 * The checks of one request, in order; each throws its wire error (a GuardError). `undefined`:
 * a public request (the capability statement), nothing checked. No Express, no SQL: the same
 * step list runs for any carrier of a request.
 */
export async function enforce(request: ResourceRequest, deps: EnforcementDeps, trace: Trace): Promise<Decision | undefined> {
  const { settings } = deps;
  if (isPublic(request)) return undefined; // the capability statement
  const accessToken = accessTokenFrom({ authorization: request.headers.authorization, tokenInQuery: hasQueryToken(request.originalUrl) }); // RFC 9449 §7.1/7.2
  const token = await deps.tokens.verify(accessToken); // JWKS, typ, alg, iss, aud, exp/nbf/iat, cnf
  const facts = factsOf(deps, token);
  trace.clientHash = facts.clientHash; // the access log never sees identities in clear
  trace.parties = facts.parties;
  const now = deps.now();
  const sent = { dpop: request.headers.dpop, method: request.method, originalUrl: request.originalUrl };
  const proof = await verifyRequestProof(settings, now, sent, accessToken, token, deps.proofKeys); // RFC 9449 §4.3, ath, cnf.jkt
  const ledger = await recordRequest(deps.state, now, {
    proof: `${proof.jkt}:${proof.jti}`,
    seenUntil: replayWindowEnd(settings, proof),
    bucket: facts.bucket,
    rule: settings.rateLimit,
  }); // jti and per-client counter, one round trip
  Object.assign(trace.responseHeaders, withinRateLimit(ledger.rate)); // per client_id, x-rate-limit-*
  proofIsFresh(ledger.fresh); // jti once across replicas
  const runner = settings.upstreamUrl ? 'upstream' : 'embedded';
  const target = decodedTarget(request, runner);
  const r = target && deps.fhir.route(request.method, target.path);
  const read = target && r && (await readRequest(deps, request, target, r));
  const reach = r && read ? deps.fhir.reach(read, r, runner) : unroutable(runner); // every interaction and type the request touches
  if (reach && read?.unreadable && runner === 'upstream') reach.unfollowed.push(read.unreadable);
  if (reach) await hasScopes(deps, reach, facts.scopes, scopeContextOf(facts.caller)); // SMART v2 scopes of all of them
  const popp = await patientPresence(deps, request, reach, token.sub, now); // PoPP where configured: missing 400, invalid 403
  const forward: Record<string, string> = { [USER_INFO]: facts.userInfo, [CLIENT_DATA]: facts.clientData }; // A_26589-01
  if (popp) forward[POPP_CONTENT] = poppContentHeader(popp.payloadJson, settings.headerCaps);
  return { caller: facts.caller, parties: facts.parties, forward };
}

/** Shared by every request with this token: nobody downstream may change it. */
function frozen(caller: Caller): Caller {
  Object.freeze(caller.scopes);
  return Object.freeze(caller);
}

function factsOf(deps: EnforcementDeps, token: AccessTokenPayload): TokenFacts {
  let facts = deps.facts.get(token);
  if (!facts) {
    facts = {
      clientHash: logHash(token.client_id),
      bucket: clientBucket(token.client_id),
      scopes: token.scope.split(' ').filter(Boolean),
      userInfo: userInfoHeader(token, deps.settings.headerCaps),
      clientData: clientDataHeader(token, deps.settings.headerCaps),
      caller: frozen(callerOf(token, deps.repositoryOwners)),
      parties: auditPartiesOf(token),
    };
    deps.facts.set(token, facts);
  }
  return facts;
}

/**
 * A request that reaches a route listed in POPP_REQUIRED_ROUTES (through a Bundle entry or a
 * search's includes and chains too) needs a PoPP; one sent elsewhere is checked too (its content
 * is forwarded).
 */
async function patientPresence(deps: EnforcementDeps, request: ResourceRequest, reach: Reach | undefined, actor: string, now: Date): Promise<VerifiedPopp | undefined> {
  const required = reach !== undefined && reachRequiresPopp(deps.settings.popp.requiredRoutes, reach);
  if (!deps.popp || (!required && request.headers.popp === undefined)) return undefined;
  return verifyPopp(deps.popp, deps.settings, { headerValues: request.headers.popp, actor, now });
}

function isPublic(request: ResourceRequest): boolean {
  return (request.method === 'GET' || request.method === 'HEAD') && /^\/metadata\/?$/.test(request.path);
}

function hasQueryToken(originalUrl: string): boolean {
  const i = originalUrl.indexOf('?');
  return i >= 0 && new URLSearchParams(originalUrl.slice(i + 1)).has('access_token');
}

async function hasScopes(deps: EnforcementDeps, reach: Reach, granted: string[], context: ScopeContext): Promise<void> {
  const polls = reach.routes.find((x) => x.interaction === 'async-status');
  const needs = requiredScopes(reach, { polled: polls ? await deps.fhir.polledReach(polls.id!) : undefined });
  const missing = missingScopes(needs, granted, context);
  if (missing.length > 0) throw new InsufficientScope(missing);
}

/**
 * The request as the FHIR layer will see it: the raw query pairs, the form parameters of
 * `POST [type]/_search`, the Bundle of `POST /fhir`. Other bodies stay unread.
 */
async function readRequest(deps: EnforcementDeps, request: ResourceRequest, target: DecodedTarget, r: Route): Promise<ReachRequest & { unreadable?: string }> {
  const { path, query } = target;
  const { method } = request;
  const bundle = r.interaction === 'transaction' || r.interaction === 'batch';
  const formSearch = r.interaction === 'search-type' && method === 'POST';
  if (!bundle && !formSearch) return { method, path, query };
  const text = await request.bodyText();
  const contentType = request.headers.contentType;
  if (formSearch) {
    if (text === undefined || (text.trim() && !contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded'))) {
      return { method, path, query, unreadable: 'the search form cannot be read' };
    }
    return { method, path, query: [...query, ...new URLSearchParams(text).entries()] };
  }
  if (!text?.trim()) return { method, path, query };
  try {
    return { method, path, query, body: deps.fhir.parseBody(request.carrier, contentType, text) };
  } catch {
    return { method, path, query }; // unparsable: no Bundle to follow (fhir/request-reach.ts)
  }
}

interface DecodedTarget {
  path: string[];
  query: [string, string][];
}

/**
 * The path segments and query pairs, decoded as the FHIR layer decodes them. A URL it cannot
 * decode (broken or invalid UTF-8 percent-encoding, a parameter without a name, a NUL) names
 * nothing: our FHIR layer answers it 400 with an OperationOutcome and runs nothing, so it needs no
 * scope (`undefined`); an upstream might read it otherwise, so there it is refused here (fail closed).
 */
function decodedTarget(request: ResourceRequest, runner: 'upstream' | 'embedded'): DecodedTarget | undefined {
  try {
    return { path: pathSegments(request.path), query: queryPairs(request.originalUrl) };
  } catch (err) {
    if (!(err instanceof MalformedUrl)) throw err;
    if (runner === 'embedded') return undefined;
    throw new InvalidRequest(`the request URL cannot be decoded: ${err.message}`);
  }
}

/** A body that cannot be read (too large: 413; else 400). */
export function unreadableBody(status: number | undefined): Error {
  return status === 413 ? new InvalidRequest('the request body is too large', { status: 413 }) : new InvalidRequest('the request body cannot be read');
}

/**
 * A request the FHIR layer cannot route runs nothing there (it answers 404/405/400 itself, before
 * any scope matters); an upstream might run it anyway, so there it needs every scope (fail closed).
 */
function unroutable(runner: 'upstream' | 'embedded'): Reach | undefined {
  return runner === 'upstream' ? { routes: [], searched: new Set(), included: new Set(), unfollowed: ['the request cannot be routed'] } : undefined;
}
