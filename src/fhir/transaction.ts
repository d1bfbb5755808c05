import crypto from 'node:crypto';
import http from 'node:http';
import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import { pathSegments } from '../model';
import { handle, route } from './interactions';
import { badRequest, notSupported, OperationOutcomeError } from '../server-lib/outcomes';
import type { FhirEnv, FhirRequest, FhirResponse } from './request';

/** R4 Bundle.entry.request.method, required binding http-verb. */
const HTTP_VERBS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']);

/** FHIR processing order for transactions (http.html#trules). */
const ORDER: Record<string, number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 3, GET: 4, HEAD: 4 };

/**
 * `POST [base]` with a transaction (all-or-nothing, local `urn:uuid:` references resolved) or
 * batch (each entry on its own) Bundle.
 */
export async function processBundle(req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  const bundle = req.body as Bundle | undefined;
  if (!bundle || bundle.resourceType !== 'Bundle') throw badRequest('POST to the base needs a Bundle', 'Bundle');
  if (bundle.type !== 'transaction' && bundle.type !== 'batch') throw badRequest(`Bundle.type must be transaction or batch, got ${String(bundle.type)}`, 'Bundle.type');
  const entries = bundle.entry ?? [];
  if (!Array.isArray(entries)) throw badRequest('Bundle.entry must be an array', 'Bundle.entry', 'structure');
  entries.forEach((e, i) => {
    if (!isObject(e)) throw badRequest(`entry ${i} must be an object`, `Bundle.entry[${i}]`, 'structure');
    if (e.request !== undefined && !isObject(e.request)) throw badRequest(`entry ${i}: request must be an object`, `Bundle.entry[${i}].request`, 'structure');
    if (!e.request?.method || !e.request.url) throw badRequest(`entry ${i}: request.method and request.url are required`, `Bundle.entry[${i}].request`);
    if (typeof e.request.method !== 'string' || typeof e.request.url !== 'string') throw badRequest(`entry ${i}: request.method and request.url must be strings`, `Bundle.entry[${i}].request`, 'structure');
    if (!HTTP_VERBS.has(e.request.method)) throw badRequest(`entry ${i}: request.method must be one of ${[...HTTP_VERBS].join(', ')}`, `Bundle.entry[${i}].request.method`, 'code-invalid');
  });
  if (bundle.type === 'batch') return batch(entries, req, env);
  return transaction(entries, req, env);
}

async function batch(entries: BundleEntry[], req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  const responses: BundleEntry[] = [];
  for (const [i, entry] of entries.entries()) {
    try {
      const entryReq = entryRequest(entry, req, i);
      const r = route(entryReq);
      // As in a transaction: an entry never runs a Bundle of its own (its entries would escape the enforcement point's walk).
      if (r.interaction === 'transaction' || r.interaction === 'batch') throw badRequest(`Bundle.entry[${i}]: Bundles cannot be nested`, `Bundle.entry[${i}]`);
      responses.push(responseEntry(await handle(entryReq, env, r)));
    } catch (err) {
      if (!(err instanceof OperationOutcomeError)) throw err;
      responses.push({ response: { status: statusLine(err.status), outcome: err.outcome } });
    }
  }
  return { resourceType: 'Bundle', type: 'batch-response', entry: responses };
}

async function transaction(entries: BundleEntry[], req: FhirRequest, env: FhirEnv): Promise<Bundle> {
  // Local identities: POST entries get their ids now so references between entries resolve.
  const localIds = new Map<string, string>();
  const assigned = new Map<number, string>();
  entries.forEach((e, i) => {
    if (e.request?.method === 'POST' && e.resource) {
      const id = crypto.randomUUID();
      assigned.set(i, id);
      if (e.fullUrl) localIds.set(e.fullUrl, `${e.resource.resourceType}/${id}`);
    } else if (e.request?.method === 'PUT' && e.fullUrl && e.resource?.id) {
      localIds.set(e.fullUrl, `${e.resource.resourceType}/${e.resource.id}`);
    }
  });
  const resolved = entries.map((e) => (e.resource ? { ...e, resource: resolveLocalReferences(e.resource, localIds) } : e));
  const order = resolved.map((_, i) => i).sort((a, b) => (ORDER[resolved[a].request!.method!] ?? 9) - (ORDER[resolved[b].request!.method!] ?? 9));
  const responses: BundleEntry[] = new Array(entries.length);
  await env.repo.withTransaction(async (repo) => {
    const txEnv = { ...env, repo };
    for (const i of order) {
      try {
        const entryReq = entryRequest(resolved[i], req, i, assigned.get(i));
        const r = route(entryReq);
        if (r.interaction === 'transaction' || r.interaction === 'batch') throw badRequest('Bundles cannot be nested', `Bundle.entry[${i}]`);
        responses[i] = responseEntry(await handle(entryReq, txEnv, r));
      } catch (err) {
        if (err instanceof OperationOutcomeError) {
          throw new OperationOutcomeError(
            err.status,
            err.issues.map((is) => ({ ...is, diagnostics: `Bundle.entry[${i}]: ${is.diagnostics ?? is.code}` })),
          );
        }
        throw err;
      }
    }
  });
  return { resourceType: 'Bundle', type: 'transaction-response', entry: responses };
}

function entryRequest(entry: BundleEntry, parent: FhirRequest, index: number, assignedId?: string): FhirRequest {
  let url: URL;
  let path: string[];
  try {
    url = new URL(entry.request!.url!, 'http://entry.invalid/');
    path = pathSegments(url.pathname);
  } catch (err) {
    throw badRequest(`request.url cannot be read: ${(err as Error).message}`, `Bundle.entry[${index}].request.url`);
  }
  // As on the REST interface (fhir/index.ts): no conditional create, said out loud.
  if (entry.request!.ifNoneExist !== undefined) throw notSupported(`Bundle.entry[${index}]: request.ifNoneExist (conditional create) is not supported`);
  const body = assignedId && entry.resource ? { ...entry.resource, id: assignedId } : entry.resource;
  return {
    method: entry.request!.method!,
    path: assignedId ? [...path, assignedId] : path,
    query: [...url.searchParams.entries()],
    body,
    headers: { ifMatch: entry.request!.ifMatch, ifNoneExist: entry.request!.ifNoneExist },
    caller: parent.caller,
    // A POST with a pre-assigned id is stored as a create under that id.
    ...(assignedId ? { method: 'PUT' } : {}),
  };
}

function responseEntry(res: FhirResponse): BundleEntry {
  return {
    resource: res.body,
    response: {
      status: statusLine(res.status),
      location: res.headers?.Location,
      etag: res.headers?.ETag,
      lastModified: res.body?.meta?.lastUpdated,
    },
  };
}

function statusLine(status: number): string {
  return `${status} ${http.STATUS_CODES[status] ?? ''}`.trim();
}

/** Replaces references to entries' fullUrls (`urn:uuid:...`) with their resolved `Type/id`. */
function resolveLocalReferences<T extends Resource>(resource: T, localIds: Map<string, string>): T {
  if (localIds.size === 0) return resource;
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        out[k] = k === 'reference' && typeof v === 'string' && localIds.has(v) ? localIds.get(v) : walk(v);
      }
      return out;
    }
    return node;
  };
  return walk(resource) as T;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
