import crypto from 'node:crypto';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import type { AuditTrail, RequestAudit } from '../audit';
import type { AuditParties } from '../server-lib/audit-port';
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { Jobs } from '../jobs';
import { Repository, SearchWindowCache, sqlState, StoreBusy, StoreUnavailable, TRANSIENT_STATES, type WriteInterceptor } from '../store';
import { BODY_LIMIT, fhirBodyText, parsedBody } from './body';
import { FHIR_JSON, FHIR_XML, FhirFormatError, formPairs, MalformedUrl, negotiateFormat, parseJson, pathSegments, queryPairs, toXml } from '../model';
import { handle, route, unknownOperation } from './interactions';
import { issue, notSupported, OperationOutcomeError, outcome } from '../server-lib/outcomes';
import type { FhirEnv, FhirRequest, Caller } from './request';
import { fhirOperations, fhirRequestJob, FHIR_REQUEST_JOB, type Operation } from './operations';
import { fhirBaseUrl } from '../config';
import { encodedOnce } from './shared-answers';
import { RETRY_AFTER_SECONDS } from '../common/retry-after';
import { jsonText } from './stored-json';


/**
 * The FHIR layer of one application: its repository runs `interceptors` on every write; its
 * asynchronous requests run on `jobs` (the FHIR request job kind is defined there); it serves the
 * built-in operations and `operations` beside them.
 */
export function fhirEnv(ctx: AppContext, parts: { interceptors: readonly WriteInterceptor[]; jobs: Jobs; operations?: readonly Operation[]; audit?: AuditTrail }): FhirEnv {
  const baseUrl = fhirBaseUrl(ctx.config);
  const repo = new Repository(ctx.db, baseUrl, ctx.now, parts.interceptors, ctx.config.searchCacheEntries > 0 ? new SearchWindowCache(ctx.config.searchCacheEntries) : undefined);
  const env: FhirEnv = { ctx, baseUrl, origin: 'rest', repo, operations: fhirOperations(parts.operations), jobs: parts.jobs, audit: parts.audit };
  parts.jobs.define(FHIR_REQUEST_JOB, fhirRequestJob(env));
  return env;
}

/**
 * HTTP adapter of the FHIR layer: body and format handling around `handle`, and the one place a
 * thrown error becomes an OperationOutcome (unknown errors: 500 with a correlation id, stack in
 * the log only).
 */
export function fhirRouter(ctx: AppContext, env: FhirEnv): Router {
  const router = Router();
  router.use(fhirBodyText());
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    const query = queryPairs(req.originalUrl);
    const format = negotiateFormat(req.header('accept'), query.find(([n]) => n === '_format')?.[1]);
    res.locals.fhirFormat = format ?? 'json';
    res.locals.pretty = query.some(([n, v]) => n === '_pretty' && v === 'true');
    const audit = requestAudit(env, req, res);
    let handled = false;
    try {
      if (!format) throw new OperationOutcomeError(406, [issue('not-supported', 'Accept: only application/fhir+json and application/fhir+xml are served')]);
      // Where the request goes is known before its body is read: a path or operation that does not exist is 404, not a body error.
      const r = route({ method: req.method, path: pathSegments(req.path), query: [], headers: {} });
      if (r.interaction === 'operation' && !env.operations.find(r.operation!, r.type)) throw unknownOperation(r);
      const fhirReq = toFhirRequest(req, query, res.locals.caller as Caller | undefined);
      fhirReq.audit = audit;
      refuseConditionalCreate(fhirReq.headers.ifNoneExist);
      handled = true;
      const result = await handle(fhirReq, env, r);
      for (const [k, v] of Object.entries(result.headers ?? {})) res.setHeader(k, v);
      send(res, result.status, result.body);
    } catch (err) {
      // Refused before an interaction ran (no such path, a body that cannot be read): recorded as a refusal.
      if (!handled && audit && env.audit) {
        const known = toOutcomeError(err);
        const status = known?.status ?? 500;
        const first = known?.issues[0];
        await env.audit.refused({ method: req.method, url: req.originalUrl, status, failure: first ? `${first.code}: ${first.diagnostics ?? ''}` : 'exception', parties: audit.parties, requestId: audit.requestId });
      }
      next(err);
    }
  });
  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const known = toOutcomeError(err);
    if (err instanceof StoreBusy) ctx.logger.warn({ requestId: res.locals.requestId as string, path: req.path, err: err.message }, 'request refused: the server is busy (database pool)');
    if (known) {
      for (const [k, v] of Object.entries(known.headers)) res.setHeader(k, v);
      send(res, known.status, known.outcome);
      return;
    }
    const correlationId = (res.locals.requestId as string) ?? crypto.randomUUID();
    ctx.logger.error({ err, requestId: correlationId, path: req.path }, 'unhandled error in FHIR request');
    send(res, 500, outcome([issue('exception', `Unexpected error; correlation id ${correlationId}`)]));
  });
  return router;
}

/** Who asks and how the request is named, for the audit trail; none when it records nothing. */
function requestAudit(env: FhirEnv, req: Request, res: Response): RequestAudit | undefined {
  if (!env.audit?.enabled) return undefined;
  const span = trace.getActiveSpan()?.spanContext();
  return {
    parties: (res.locals.auditParties as AuditParties | undefined) ?? { address: req.ip },
    requestId: res.locals.requestId as string | undefined,
    traceId: span && isSpanContextValid(span) ? span.traceId : undefined,
  };
}

/**
 * FHIRPath of a body-level problem (not JSON, not XML, not an object): the whole resource. A
 * client can then tell a broken body from a broken element the same way for every 400.
 */
const WHOLE_BODY = '$this';

function toOutcomeError(err: unknown): OperationOutcomeError | undefined {
  if (err instanceof OperationOutcomeError) return err;
  if (err instanceof StoreBusy) {
    return new OperationOutcomeError(503, [issue('transient', `The server is busy: ${err.message}; retry later`)], { 'Retry-After': RETRY_AFTER_SECONDS.storeBusy });
  }
  if (err instanceof StoreUnavailable) {
    return new OperationOutcomeError(503, [issue('transient', 'The database is unavailable; retry later')], { 'Retry-After': RETRY_AFTER_SECONDS.storeUnavailable });
  }
  // PostgreSQL aborted the write for a concurrent one, again on every run it was given: the same
  // request may succeed a moment later.
  const state = sqlState(err);
  if (state !== undefined && TRANSIENT_STATES.includes(state)) {
    return new OperationOutcomeError(503, [issue('transient', 'The request collided with concurrent writes; retry')], { 'Retry-After': '1' });
  }
  if (err instanceof FhirFormatError) {
    const expression = err.expression ?? (err.status === 400 && !(err instanceof MalformedUrl) ? WHOLE_BODY : undefined);
    return new OperationOutcomeError(err.status, [issue(err.code as 'structure', err.message, expression)]);
  }
  // body-parser: payload too large (charset and UTF-8 are checked in body.ts)
  const status = (err as { status?: number; type?: string })?.status;
  if (status === 413) return new OperationOutcomeError(413, [issue('too-costly', `Request body larger than ${BODY_LIMIT}`)]);
  if (status === 415) return new OperationOutcomeError(415, [issue('not-supported', 'Unsupported request body encoding')]);
  if (status === 400) return new OperationOutcomeError(400, [issue('structure', 'Malformed request body', WHOLE_BODY)]);
  return undefined;
}

function send(res: Response, status: number, body?: Resource): void {
  res.status(status);
  if (!body) {
    res.end();
    return;
  }
  const xml = res.locals.fhirFormat === 'xml';
  const pretty = !xml && res.locals.pretty === true;
  const { bytes, etag } = encodedOnce(body, xml ? 'xml' : pretty ? 'json-pretty' : 'json', () => {
    // A Buffer keeps our Content-Type as written (res.send lower-cases the charset of strings).
    const text = xml ? toXml(body) : pretty ? JSON.stringify(body, null, 2) : jsonText(body);
    const buffer = Buffer.from(text, 'utf8');
    return { bytes: buffer, etag: entityTag(res, buffer) };
  });
  res.setHeader('Content-Type', xml ? FHIR_XML : FHIR_JSON);
  // The tag Express would compute for these bytes (it leaves a tag already set alone): computed once for a shared answer.
  if (etag !== undefined && !res.getHeader('ETag')) res.setHeader('ETag', etag);
  res.send(bytes);
}

/** The application's entity tag for a response body (Express `etag` setting); none when switched off. */
function entityTag(res: Response, body: Buffer): string | undefined {
  const tagOf = res.app.get('etag fn') as ((body: Buffer, encoding?: string) => string) | undefined;
  return tagOf?.(body);
}


function toFhirRequest(req: Request, query: [string, string][], caller?: Caller): FhirRequest {
  const contentType = req.header('content-type');
  const text = typeof req.body === 'string' ? req.body : '';
  let body: unknown;
  let pairs = query;
  if (text.trim() !== '') {
    if (contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded')) {
      // POST [type]/_search: form parameters join the URL's.
      pairs = [...query, ...formPairs(text)];
    } else if (contentType?.toLowerCase().startsWith('application/json-patch+json')) {
      body = parseJsonPatch(text);
    } else {
      body = parsedBody(req, contentType, text);
    }
  }
  return {
    // HEAD runs as GET; Express leaves the body out of the answer.
    method: req.method === 'HEAD' ? 'GET' : req.method,
    path: pathSegments(req.path),
    query: pairs,
    body,
    contentType,
    headers: {
      ifMatch: req.header('if-match'),
      ifNoneExist: req.header('if-none-exist'),
      prefer: req.header('prefer'),
    },
    caller,
  };
}

/**
 * Conditional create is not offered (the CapabilityStatement says conditionalCreate false): a
 * client relying on If-None-Exist for idempotency must hear so, not get a second resource.
 */
function refuseConditionalCreate(ifNoneExist: string | undefined): void {
  if (ifNoneExist !== undefined) throw notSupported('If-None-Exist (conditional create) is not supported by this server');
}

function parseJsonPatch(text: string): unknown {
  try {
    return parseJson(text);
  } catch (err) {
    throw new OperationOutcomeError(400, [issue('structure', `JSON Patch body: ${(err as Error).message}`, WHOLE_BODY)]);
  }
}
