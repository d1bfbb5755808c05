import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { guardDecisions } from '../../server-lib/metrics';
import type { AppContext } from '../../context';
import { FhirFormatError } from '../../model';
import type { FhirReachPort } from '../../common/fhir-reach';
import { isGuardError } from '../errors';
import type { SecurityAudit } from '../../server-lib/audit-port';
import { clientIp, sendGuardError } from '../http/respond';
import { SigningKeys } from '../keys/signing-keys';
import { guardSettings } from '../settings';
import { RevokedSessions } from '../state/revoked-sessions';
import { sharedState, type SharedState } from '../state/shared-state';
import { enforce, unreadableBody, type EnforcementDeps, type ResourceRequest, type Trace } from './enforce';
import { withChallenge } from './errors';
import { stripIdentityHeaders } from './forwarded-headers';
import { PoppJwks } from './popp/popp-jwks';
import { pepSettings, type PepSettings } from './settings';
import { AccessTokenVerifier } from '../authserver/tokens/verify-access-token';
import { Es256KeyCache } from '../jose/es256';

export { upstreamProxy } from './upstream-proxy';
export { pepSettings, type PepSettings } from './settings';
export { enforce, type Decision, type ResourceRequest } from './enforce';

export interface PepOptions {
  /** The FHIR layer's answers: what a request routes to and reaches (fhir/request-reach.ts). */
  fhir: FhirReachPort;
  /** The FHIR layer's body reader (UTF-8, size limit): the enforcement point reads a Bundle first, the FHIR layer then skips. */
  readBody: RequestHandler;
  settings?: Partial<PepSettings>;
  /** The application's shared guard state (app.ts chooses it once); by default one of its own. */
  state?: SharedState;
  /** The application's session liveness, shared with its authorization server; by default one of its own. */
  sessions?: RevokedSessions;
  /** The audit trail, told of every request refused here (docs/architecture.md, Audit trail). */
  audit?: SecurityAudit;
}

/**
 * The enforcement point in front of /fhir. After it, nothing under /fhir
 * but `GET /fhir/metadata` is served without a valid DPoP-bound access token. With
 * GUARD_ENFORCEMENT=off it only strips client-sent identity headers.
 */
export function enforcementPoint(ctx: AppContext, options: PepOptions) {
  const settings = pepSettings(ctx.config, options.settings);
  if (!ctx.config.guardEnforcement) {
    return (req: Request, _res: Response, next: NextFunction) => {
      stripIdentityHeaders(req.headers);
      next();
    };
  }
  const deps: EnforcementDeps = {
    settings,
    now: ctx.now,
    repositoryOwners: ctx.config.repositoryOwners,
    tokens: new AccessTokenVerifier(new SigningKeys(ctx, guardSettings(ctx.config)), settings, ctx.now, options.sessions ?? new RevokedSessions(ctx.db)),
    proofKeys: new Es256KeyCache(),
    state: options.state ?? sharedState(ctx),
    fhir: options.fhir,
    facts: new WeakMap(),
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
  };
  return (req: Request, res: Response, next: NextFunction) => {
    stripIdentityHeaders(req.headers); // A_25669-01: before anything trusts them
    const trace: Trace = { responseHeaders: {} };
    const answer = () => {
      for (const [k, v] of Object.entries(trace.responseHeaders)) res.setHeader(k, v);
      if (trace.clientHash) res.locals.clientHash = trace.clientHash;
    };
    enforce(resourceRequest(req, options.readBody), deps, trace).then(
      (decision) => {
        answer();
        if (decision) {
          guardDecisions.inc({ decision: 'allowed', error: '' });
          for (const [k, v] of Object.entries(decision.forward)) req.headers[k] = v;
          res.locals.caller = decision.caller; // the FHIR layer's typed caller
          res.locals.auditParties = { ...decision.parties, address: clientIp(req) };
        }
        next();
      },
      async (err: unknown) => {
        answer();
        if (!isGuardError(err)) return next(err);
        // A refusal is recorded with what is known: the token's parties when it verified, else the
        // address alone. Not a rate limit's 429 or a 503: no access was judged, and a flood of them
        // must not become a flood of writes.
        // Not awaited: a refusal returned no data, and its answer must not wait for the store.
        if (err.status !== 429 && err.status < 500) void options.audit?.refused({
          method: req.method,
          url: req.originalUrl,
          status: err.status,
          failure: `${err.code}: ${err.description}`,
          parties: { ...trace.parties, address: clientIp(req) },
          requestId: res.locals.requestId as string | undefined,
        });
        sendGuardError(res, settings.issuer, withChallenge(err));
      },
    )
      // Answering can fail too (a header value Node refuses): the app's 500, not an unhandled rejection that ends the process.
      .catch(next);
  };
}

/** The Express request as the enforcement point reads it. */
function resourceRequest(req: Request, readBody: RequestHandler): ResourceRequest {
  return {
    method: req.method,
    path: req.path,
    originalUrl: req.originalUrl,
    headers: {
      authorization: req.headersDistinct.authorization,
      dpop: req.headersDistinct.dpop,
      popp: req.headersDistinct.popp,
      contentType: req.header('content-type'),
    },
    bodyText: () => bodyText(req, readBody),
    carrier: req,
  };
}

/**
 * Reads the body before the FHIR layer does (its parser then skips); too large is 413. A body
 * that is not UTF-8 is `undefined` here: our FHIR layer answers its OperationOutcome and runs
 * nothing; for an upstream it fails closed (`unreadable`).
 */
async function bodyText(req: Request, readBody: RequestHandler): Promise<string | undefined> {
  await new Promise<void>((resolve, reject) =>
    readBody(req, {} as Response, (err?: unknown) => {
      if (!err || err instanceof FhirFormatError) return resolve();
      reject(unreadableBody((err as { status?: number }).status));
    }),
  );
  if (typeof req.body === 'string') return req.body;
  return req.body === undefined || (Buffer.isBuffer(req.body) && req.body.length === 0) ? '' : undefined;
}
