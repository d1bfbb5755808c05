import express, { type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from '../../context';
import { route, type Route } from '../../fhir/interactions';
import { fhirBodyText, parsedBody } from '../../fhir/body';
import { FhirFormatError, pathSegments, queryPairs } from '../../model';
import type { FhirRequest, RequestIdentity } from '../../fhir/request';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';
import { InvalidRequest, isGuardError } from '../errors';
import { sendGuardError } from '../http/respond';
import { SigningKeys } from '../keys/signing-keys';
import { guardSettings } from '../settings';
import { accessTokenFrom } from './access-token-credentials';
import { InsufficientScope, withChallenge } from './errors';
import { CLIENT_DATA, clientDataHeader, POPP_CONTENT, poppContentHeader, stripIdentityHeaders, USER_INFO, userInfoHeader } from './forwarded-headers';
import { logHash, requestIdentity } from './identity';
import { PoppJwks } from './popp/popp-jwks';
import { reachRequiresPopp } from './popp/popp-routes';
import { verifyPopp, type VerifiedPopp } from './popp/verify-popp';
import { clientBucket, withinRateLimit } from './rate-limit-per-client';
import { recordRequest } from './request-ledger';
import { reachOf, type Reach, type ReachRequest } from './request-reach';
import { missingScopes, requiredScopes, type PolledJob } from './required-scopes';
import { pepSettings, type PepSettings } from './settings';
import { RevokedSessions } from '../state/revoked-sessions';
import { sharedState, type SharedState } from '../state/shared-state';
import { AccessTokenVerifier } from './verify-access-token';
import { ProofKeyCache, proofIsFresh, replayWindowEnd, verifyRequestProof } from './verify-request-proof';

export { upstreamProxy } from './upstream-proxy';
export { pepSettings, type PepSettings } from './settings';

export interface PepOptions {
  settings?: Partial<PepSettings>;
  /** The application's shared guard state (app.ts chooses it once); by default one of its own. */
  state?: SharedState;
}

/** What a verified token yields for every request that presents it: computed once per token. */
interface TokenFacts {
  clientHash: string;
  bucket: string;
  scopes: string[];
  userInfo: string;
  clientData: string;
  identity: RequestIdentity;
}

interface Pep {
  ctx: AppContext;
  state: SharedState;
  facts: WeakMap<AccessTokenPayload, TokenFacts>;
  settings: PepSettings;
  tokens: AccessTokenVerifier;
  proofKeys: ProofKeyCache;
  popp?: PoppJwks;
  /** Reads a transaction/batch body before the FHIR layer does (its parser then skips). */
  readBody: express.RequestHandler;
}

/**
 * The enforcement point in front of /fhir (issue 6; seed 000 4.8). After it, nothing under /fhir
 * but `GET /fhir/metadata` is served without a valid DPoP-bound access token. With
 * GUARD_ENFORCEMENT=off it only strips client-sent identity headers.
 */
export function enforcementPoint(ctx: AppContext, options: PepOptions = {}) {
  const settings = pepSettings(ctx.config, options.settings);
  if (!ctx.config.guardEnforcement) {
    return (req: Request, _res: Response, next: NextFunction) => {
      stripIdentityHeaders(req.headers);
      next();
    };
  }
  const pep: Pep = {
    ctx,
    state: options.state ?? sharedState(ctx),
    facts: new WeakMap(),
    settings,
    tokens: new AccessTokenVerifier(new SigningKeys(ctx, guardSettings(ctx.config)), settings, ctx.now, new RevokedSessions(ctx.db)),
    proofKeys: new ProofKeyCache(),
    popp: settings.popp.jwksUrl
      ? new PoppJwks({
          url: settings.popp.jwksUrl,
          now: ctx.now,
          logger: ctx.logger,
          refreshSec: settings.popp.jwksRefreshSec,
          staleSec: settings.popp.jwksStaleSec,
          timeoutMs: settings.popp.jwksTimeoutMs,
        })
      : undefined,
    readBody: fhirBodyText(),
  };
  return (req: Request, res: Response, next: NextFunction) => {
    enforce(pep, req, res).then(
      () => next(),
      (err: unknown) => {
        if (!isGuardError(err)) return next(err);
        sendGuardError(res, settings.issuer, withChallenge(err));
      },
    );
  };
}

/** The checks of one request, in order; each throws its wire error. */
async function enforce(pep: Pep, req: Request, res: Response): Promise<void> {
  const { ctx, settings } = pep;
  stripIdentityHeaders(req.headers); // A_25669-01: before anything trusts them
  if (isPublic(req)) return; // CONTRACT 3: the capability statement
  const accessToken = accessTokenFrom({ authorization: req.headers.authorization, tokenInQuery: hasQueryToken(req) }); // RFC 9449 §7.1/7.2
  const token = await pep.tokens.verify(accessToken); // JWKS, typ, alg, iss, aud, exp/nbf/iat, cnf
  const facts = factsOf(pep, token);
  res.locals.clientHash = facts.clientHash; // the access log never sees identities in clear
  const now = ctx.now();
  const sent = { dpop: req.headersDistinct.dpop, method: req.method, originalUrl: req.originalUrl };
  const proof = await verifyRequestProof(settings, now, sent, accessToken, token, pep.proofKeys); // RFC 9449 §4.3, ath, cnf.jkt
  const ledger = await recordRequest(pep.state, now, {
    proof: `${proof.jkt}:${proof.jti}`,
    seenUntil: replayWindowEnd(settings, proof),
    bucket: facts.bucket,
    rule: settings.rateLimit,
  }); // jti and per-client counter, one round trip
  for (const [k, v] of Object.entries(withinRateLimit(ledger.rate))) res.setHeader(k, v); // per client_id, x-rate-limit-*
  proofIsFresh(ledger.fresh); // jti once across replicas
  const r = routeOf(req);
  const runner = settings.upstreamUrl ? 'upstream' : 'embedded';
  const read = r && (await fhirRequestOf(pep, req, r));
  const reach = r && read ? reachOf(read, r, runner) : undefined; // every interaction and type the request touches
  if (reach && read?.unreadable && runner === 'upstream') reach.unfollowed.push(read.unreadable);
  if (reach) await hasScopes(pep, reach, facts.scopes); // SMART v2 scopes of all of them
  const popp = await patientPresence(pep, req, reach, token.sub, now); // PoPP where configured: missing 400, invalid 403
  req.headers[USER_INFO] = facts.userInfo; // seed 000 2.11
  req.headers[CLIENT_DATA] = facts.clientData;
  if (popp) req.headers[POPP_CONTENT] = poppContentHeader(popp.payloadJson, settings.headerCaps);
  res.locals.identity = facts.identity; // the FHIR layer's typed caller
}

/** Shared by every request with this token: nobody downstream may change it. */
function frozen(identity: RequestIdentity): RequestIdentity {
  Object.freeze(identity.scopes);
  return Object.freeze(identity);
}

function factsOf(pep: Pep, token: AccessTokenPayload): TokenFacts {
  let facts = pep.facts.get(token);
  if (!facts) {
    facts = {
      clientHash: logHash(token.client_id),
      bucket: clientBucket(token.client_id),
      scopes: token.scope.split(' ').filter(Boolean),
      userInfo: userInfoHeader(token, pep.settings.headerCaps),
      clientData: clientDataHeader(token, pep.settings.headerCaps),
      identity: frozen(requestIdentity(token, pep.ctx.config.repositoryOwners)),
    };
    pep.facts.set(token, facts);
  }
  return facts;
}

/**
 * A request that reaches a route listed in POPP_REQUIRED_ROUTES (through a Bundle entry or a
 * search's includes and chains too) needs a PoPP; one sent elsewhere is checked too (its content
 * is forwarded).
 */
async function patientPresence(pep: Pep, req: Request, reach: Reach | undefined, actor: string, now: Date): Promise<VerifiedPopp | undefined> {
  const required = reach !== undefined && reachRequiresPopp(pep.settings.popp.requiredRoutes, reach);
  if (!pep.popp || (!required && req.headers.popp === undefined)) return undefined;
  return verifyPopp(pep.popp, pep.settings, { headerValues: req.headersDistinct.popp, actor, now });
}

function isPublic(req: Request): boolean {
  return req.method === 'GET' && /^\/metadata\/?$/.test(req.path);
}

function hasQueryToken(req: Request): boolean {
  const i = req.originalUrl.indexOf('?');
  return i >= 0 && new URLSearchParams(req.originalUrl.slice(i + 1)).has('access_token');
}

/** The FHIR interaction asked for; undefined when the FHIR layer will refuse the request anyway (404/405/400, nothing runs). */
function routeOf(req: Request): Route | undefined {
  try {
    const fhirReq: FhirRequest = { method: req.method, path: pathSegments(req.path), query: [], headers: {} };
    return route(fhirReq);
  } catch {
    return undefined;
  }
}

async function hasScopes(pep: Pep, reach: Reach, granted: string[]): Promise<void> {
  const polls = reach.routes.find((x) => x.interaction === 'async-status');
  const needs = requiredScopes(reach, { polled: polls ? await polledJob(pep.ctx, polls.id!) : undefined });
  const missing = missingScopes(needs, granted);
  if (missing.length > 0) throw new InsufficientScope(missing);
}

/**
 * The request as the FHIR layer will see it (fhir/index.ts): the raw query pairs, the form
 * parameters of `POST [type]/_search`, the Bundle of `POST /fhir`. Other bodies stay unread.
 */
async function fhirRequestOf(pep: Pep, req: Request, r: Route): Promise<ReachRequest & { unreadable?: string }> {
  const path = pathSegments(req.path);
  const query = queryPairs(req.originalUrl);
  const bundle = r.interaction === 'transaction' || r.interaction === 'batch';
  const formSearch = r.interaction === 'search-type' && req.method === 'POST';
  if (!bundle && !formSearch) return { method: req.method, path, query };
  const text = await bodyText(pep, req);
  const contentType = req.header('content-type');
  if (formSearch) {
    if (text === undefined || (text.trim() && !contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded'))) {
      return { method: req.method, path, query, unreadable: 'the search form cannot be read' };
    }
    return { method: req.method, path, query: [...query, ...new URLSearchParams(text).entries()] };
  }
  if (!text?.trim()) return { method: req.method, path, query };
  try {
    return { method: req.method, path, query, body: parsedBody(req, contentType, text) };
  } catch {
    return { method: req.method, path, query }; // unparsable: no Bundle to follow (request-reach.ts)
  }
}

/**
 * Reads the body before the FHIR layer does (its parser then skips); too large is 413. A body
 * that is not UTF-8 is `undefined` here: our FHIR layer answers its OperationOutcome and runs
 * nothing; for an upstream it fails closed (request-reach.ts `unparsable`, `unreadable`).
 */
async function bodyText(pep: Pep, req: Request): Promise<string | undefined> {
  await new Promise<void>((resolve, reject) =>
    pep.readBody(req, {} as Response, (err?: unknown) => {
      if (!err || err instanceof FhirFormatError) return resolve();
      const status = (err as { status?: number }).status;
      reject(status === 413 ? new InvalidRequest('the request body is too large', { status: 413 }) : new InvalidRequest('the request body cannot be read'));
    }),
  );
  if (typeof req.body === 'string') return req.body;
  return req.body === undefined || (Buffer.isBuffer(req.body) && req.body.length === 0) ? '' : undefined;
}


async function polledJob(ctx: AppContext, id: string): Promise<PolledJob | undefined> {
  const r = await ctx.db.query<PolledJob>('SELECT kind, payload FROM async_job WHERE id = $1', [id]);
  return r.rows[0];
}
