import type { OperationDefinition, Resource } from '@medplum/fhirtypes';
import { RESOURCE_TYPES } from '../../store';
import { checkIfMatch } from '../../store';
import { canSee } from '../../server-lib/owner';
import { checkBody, written } from '../interactions';
import { gone, issue, notFound, OperationOutcomeError } from '../../server-lib/outcomes';
import { writerRepo, type FhirEnv, type FhirRequest, type FhirResponse } from '../request';
import { applyFhirPathPatch } from './fhirpath-patch';
import { applyJsonPatchToResource } from './json-patch';
import { PatchError } from './patch-error';
import type { Operation } from './registry';

/**
 * `PATCH [type]/[id]` for every stored type: FHIRPath Patch `Parameters` (FHIR R4
 * fhirpatch.html; ISiK 6.0.0 requires it for Appointment) or `application/json-patch+json`.
 * The patched resource passes the same checks and write interceptors as a PUT (for Appointment: the
 * immutable elements, cancellation, confirmation), under `If-Match` when given (412).
 */
const PATCH_DEFINITION = {
  resourceType: 'OperationDefinition',
  url: 'http://terminus.local/fhir/OperationDefinition/patch',
  name: 'Patch',
  status: 'active',
  kind: 'operation',
  code: 'patch',
  system: false,
  type: false,
  instance: true,
  affectsState: true,
  resource: [...RESOURCE_TYPES] as OperationDefinition['resource'],
} satisfies OperationDefinition;

export const patchOperation: Operation = {
  definition: PATCH_DEFINITION,
  internal: true,
  handler: (req, env, target) => patch(req, env, target.type as string, target.id as string),
};

async function patch(req: FhirRequest, env: FhirEnv, type: string, id: string): Promise<FhirResponse> {
  const jsonPatch = (req.contentType ?? '').toLowerCase().startsWith('application/json-patch+json');
  if (req.body === undefined) throw new OperationOutcomeError(400, [issue('required', 'PATCH needs a body: FHIRPath Patch Parameters or a JSON Patch')]);
  const scope = req.caller;
  const stored = await writerRepo(env, req).withTransaction(async (repo) => {
    const row = await repo.readRow(type, id, { forUpdate: true });
    if (!row || !canSee(row.owner, scope, row.resource)) throw notFound(type, id);
    if (row.deleted) throw gone(type, id);
    // If-Match first: a stale patch is refused as stale, whatever it would change.
    checkIfMatch(req.headers.ifMatch, row.versionId);
    const patched = { ...apply(row.resource, req.body, jsonPatch), id };
    // A patch without operations asks for no change: it writes no version, the current one is
    // the answer. (Operations that end where they began still write one, as a PUT of the same
    // content does.)
    if (hasNoOperations(req.body)) return row.resource;
    // Domain rules (the interceptors) first: a patch touching an element that must not change
    // (Appointment.start, ...) is refused for that (400) even when the result would also be invalid.
    const validate = (resource: Resource) => checkBody(type, resource, id);
    return (await repo.update(patched, { ifMatch: req.headers.ifMatch, scope, interaction: 'patch', validate })).resource;
  });
  return written(stored, 200, env, req);
}

function apply(resource: Resource, body: unknown, jsonPatch: boolean): Resource {
  try {
    return jsonPatch ? applyJsonPatchToResource(resource, body) : applyFhirPathPatch(resource, body);
  } catch (err) {
    if (err instanceof PatchError) throw new OperationOutcomeError(err.status, [issue(err.code, err.message, err.expression)]);
    throw err;
  }
}

/** `[]` (JSON Patch) or Parameters without `parameter`: checked after apply() accepted the shape. */
function hasNoOperations(body: unknown): boolean {
  if (Array.isArray(body)) return body.length === 0;
  const parameters = (body as { parameter?: unknown[] }).parameter;
  return parameters === undefined || parameters.length === 0;
}
