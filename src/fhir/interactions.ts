import type { Bundle, Resource } from '@medplum/fhirtypes';
import { isStoredType } from '../store';
import { parseSubsetting } from './search-request';
import { ownerForWrite } from '../server-lib/owner';
import { isFhirId } from '../server-lib/fhir-id';
import { capabilityStatement } from './capability';
import { badRequest, notFound, notSupported, OperationOutcomeError, outcome, issue } from '../server-lib/outcomes';
import { preferHeader, writerRepo, type FhirEnv, type FhirRequest, type FhirResponse } from './request';
import { fullUrl, searchType, subset } from './search';
import { processBundle } from './transaction';
import { allowsGet } from './operations/registry';
import { validateResource } from '../model';
import type { Route } from '../common/fhir-reach';
import { audited, auditEventInteraction } from './audited';

export type { Route } from '../common/fhir-reach';

/** Maps a request to the interaction it asks for; unknown shapes answer 404/405. */
export function route(req: FhirRequest): Route {
  const [a, b, c, d, ...rest] = req.path;
  // RFC 9110 §9.3.2: HEAD is GET without the body, for the guard's scope check as for the answer.
  const m = req.method === 'HEAD' ? 'GET' : req.method;
  if (rest.length) throw notFound('path', req.path.join('/'));
  if (a === undefined) {
    if (m === 'POST') return { interaction: 'transaction' };
    throw methodNotAllowed(m, '/');
  }
  if (a === 'metadata' && b === undefined) {
    if (m !== 'GET') throw methodNotAllowed(m, 'metadata');
    return { interaction: 'capabilities' };
  }
  if (a.startsWith('$')) return { interaction: 'operation', operation: a.slice(1) };
  if (a === '_async' && b !== undefined && c === undefined) return { interaction: 'async-status', id: b };
  if (!isStoredType(a) && a !== 'AuditEvent') throw notFound('resource type', a);
  if (b === undefined) {
    if (m === 'GET') return { interaction: 'search-type', type: a };
    if (m === 'POST') return { interaction: 'create', type: a };
    throw methodNotAllowed(m, a);
  }
  if (b === '_search' && c === undefined) {
    if (m !== 'POST') throw methodNotAllowed(m, `${a}/_search`);
    return { interaction: 'search-type', type: a };
  }
  if (b.startsWith('$') && c === undefined) return { interaction: 'operation', type: a, operation: b.slice(1) };
  if (!isFhirId(b)) throw badRequest(`Invalid id "${b}"`, `${a}.id`);
  if (c === undefined) {
    if (m === 'GET') return { interaction: 'read', type: a, id: b };
    if (m === 'PUT') return { interaction: 'update', type: a, id: b };
    if (m === 'PATCH') return { interaction: 'patch', type: a, id: b };
    if (m === 'DELETE') return { interaction: 'delete', type: a, id: b };
    throw methodNotAllowed(m, `${a}/${b}`);
  }
  if (c.startsWith('$') && d === undefined) return { interaction: 'operation', type: a, id: b, operation: c.slice(1) };
  if (c === '_history') {
    if (m !== 'GET') throw methodNotAllowed(m, `${a}/${b}/_history`);
    if (d === undefined) return { interaction: 'history-instance', type: a, id: b };
    return { interaction: 'vread', type: a, id: b, versionId: d };
  }
  throw notFound('path', req.path.join('/'));
}

/** An operation this server does not have: 404 not-supported (answered before the body is read). */
export function unknownOperation(r: Route): OperationOutcomeError {
  return new OperationOutcomeError(404, [issue('not-supported', `this server has no operation $${r.operation}${r.type ? ` on ${r.type}` : ''} (see GET /fhir/metadata)`)]);
}

function methodNotAllowed(method: string, path: string): OperationOutcomeError {
  return new OperationOutcomeError(405, [issue('not-supported', `${method} is not supported on ${path}`)]);
}

/** Executes one FHIR request (HTTP, Bundle entry or job): the single entry point of the FHIR layer; each is recorded in the audit trail. */
export async function handle(req: FhirRequest, env: FhirEnv, r: Route = route(req)): Promise<FhirResponse> {
  return audited(req, env, r, () => dispatch(req, env, r));
}

async function dispatch(req: FhirRequest, env: FhirEnv, r: Route): Promise<FhirResponse> {
  if (r.type === 'AuditEvent') return auditEventInteraction(req, env, r);
  switch (r.interaction) {
    case 'capabilities':
      return { status: 200, body: capabilityStatement(env) };
    case 'read':
    case 'vread': {
      const subsetting = parseSubsetting(req.query);
      const resource = r.interaction === 'read' ? await env.repo.read(r.type!, r.id!, req.caller) : await env.repo.vread(r.type!, r.id!, r.versionId!, req.caller);
      return { status: 200, body: subset(resource, subsetting), headers: versionHeaders(resource) };
    }
    case 'history-instance':
      return { status: 200, body: await history(r.type!, r.id!, req, env) };
    case 'search-type':
      return { status: 200, body: await searchType(r.type!, req, env) };
    case 'create':
      return create(r.type!, req, env);
    case 'update':
      return update(r.type!, r.id!, req, env);
    case 'patch': {
      const patch = env.operations.find('patch', r.type);
      if (!patch) throw notSupported(`PATCH is not supported on ${r.type}`, 405);
      return patch.handler(req, env, { type: r.type, id: r.id });
    }
    case 'delete':
      return remove(r.type!, r.id!, req, env);
    case 'transaction':
    case 'batch':
      return { status: 200, body: await processBundle(req, env) };
    case 'async-status': {
      // Polling URL of an asynchronous request (FHIR async pattern), served by the jobs part.
      const poll = env.operations.find('async-status');
      if (!poll) throw notFound('async request', r.id);
      if (req.method !== 'GET' && req.method !== 'DELETE') throw methodNotAllowed(req.method, `_async/${r.id}`);
      return poll.handler(req, env, { id: r.id });
    }
    case 'operation': {
      const op = env.operations.find(r.operation!, r.type);
      if (!op) throw unknownOperation(r);
      if (req.method !== 'POST' && !(req.method === 'GET' && allowsGet(op))) throw methodNotAllowed(req.method, `$${r.operation}`);
      return op.handler(req, env, { type: r.type, id: r.id });
    }
  }
}

function versionHeaders(resource: Resource): Record<string, string> {
  const headers: Record<string, string> = {};
  if (resource.meta?.versionId) headers.ETag = `W/"${resource.meta.versionId}"`;
  if (resource.meta?.lastUpdated) headers['Last-Modified'] = new Date(resource.meta.lastUpdated).toUTCString();
  return headers;
}

/** Body checks shared by create and update: a resource of the URL's type, valid for the repository. */
export function checkBody(type: string, body: unknown, id?: string): Resource {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a FHIR resource', type);
  const resource = body as Resource;
  if (resource.resourceType !== type) {
    throw badRequest(`Resource type ${String(resource.resourceType)} does not match the URL (${type})`, 'resourceType');
  }
  if (id !== undefined && resource.id !== id) throw badRequest(`Resource id "${String(resource.id)}" does not match the URL id "${id}"`, `${type}.id`);
  const result = validateResource(resource);
  if (!result.ok) throw new OperationOutcomeError(result.status, result.issues);
  return resource;
}

async function create(type: string, req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  const body = checkBody(type, withoutId(req.body));
  const stored = await writerRepo(env, req).create(body, { owner: ownerForWrite(type, req.caller) });
  return written(stored, 201, env, req);
}

async function update(type: string, id: string, req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  const body = checkBody(type, req.body, id);
  const scope = req.caller;
  // Another institution's resource does not exist for this requester (404 before any rule runs).
  const { resource, created } = await writerRepo(env, req).update(body, { ifMatch: req.headers.ifMatch, scope, owner: ownerForWrite(type, req.caller) });
  return written(resource, created ? 201 : 200, env, req);
}

async function remove(type: string, id: string, req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  await writerRepo(env, req).delete(type, id, { ifMatch: req.headers.ifMatch, scope: req.caller });
  return { status: 200, body: outcome([issue('informational', `${type}/${id} deleted`, undefined, 'information')]) };
}

/** 200/201 with Location and ETag; `Prefer: return=minimal` drops the body. */
export function written(resource: Resource, status: number, env: FhirEnv, req: FhirRequest): FhirResponse {
  const headers = {
    ...versionHeaders(resource),
    Location: `${fullUrl(env, resource)}/_history/${resource.meta?.versionId}`,
  };
  const prefer = preferHeader(req).return;
  if (prefer === 'minimal') return { status, headers };
  if (prefer === 'OperationOutcome') return { status, headers, body: outcome([issue('informational', `${resource.resourceType}/${resource.id} stored`, undefined, 'information')]) };
  return { status, headers, body: resource };
}

function withoutId(body: unknown): unknown {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const { id: _ignored, ...rest } = body as Record<string, unknown>;
    return rest;
  }
  return body;
}

async function history(type: string, id: string, req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  const versions = await env.repo.history(type, id, req.caller);
  return {
    resourceType: 'Bundle',
    type: 'history',
    total: versions.length,
    link: [{ relation: 'self', url: `${env.baseUrl}/${type}/${id}/_history` }],
    entry: versions.map((v) => ({
      fullUrl: `${env.baseUrl}/${type}/${id}`,
      resource: v.deleted ? undefined : v.resource,
      request: { method: v.deleted ? 'DELETE' : v.versionId === 1 ? 'POST' : 'PUT', url: v.versionId === 1 ? type : `${type}/${id}` },
      response: { status: v.deleted ? '204' : v.versionId === 1 ? '201' : '200', etag: `W/"${v.versionId}"`, lastModified: v.lastUpdated },
    })),
  };
}
