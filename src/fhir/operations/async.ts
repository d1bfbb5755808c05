import type { OperationDefinition } from '@medplum/fhirtypes';
import type { JobKind } from '../../jobs';
import { handle } from '../interactions';
import { conflict, issue, notFound, OperationOutcomeError, outcome } from '../../server-lib/outcomes';
import { canSee } from '../../server-lib/owner';
import { type FhirEnv, type FhirRequest, type FhirResponse } from '../request';
import { definitionOf, type Operation } from './registry';

/**
 * FHIR asynchronous request pattern (ISiK Terminplanung 6.0.0, asynchronous $book): the kick-off
 * answers 202 with an absolute Content-Location; polling it answers 202 while the job runs, then
 * the job's own status and body (the Appointment or the OperationOutcome), as the ISiK reference
 * mock does. DELETE cancels a queued job (or discards a result); afterwards the poll answers 404.
 */
const ASYNC_STATUS_DEFINITION = {
  resourceType: 'OperationDefinition',
  url: 'http://terminus.local/fhir/OperationDefinition/async-status',
  name: 'AsyncStatus',
  status: 'active',
  kind: 'operation',
  code: 'async-status',
  system: true,
  type: false,
  instance: false,
  affectsState: false,
  description: 'Polling URL of a request made with Prefer: respond-async ([base]/_async/{id}); GET polls, DELETE cancels.',
} as const satisfies OperationDefinition;

/** Polling interval suggested to clients (seconds). */
const RETRY_AFTER_S = 1;

/** Headers that mark an answer as "still running". */
const POLLING_HEADERS = new Set(['retry-after', 'x-progress']);

/** The job kind of a FHIR request run later. */
export const FHIR_REQUEST_JOB = 'fhir-request';

export const asyncStatusOperation: Operation = {
  definition: definitionOf(ASYNC_STATUS_DEFINITION),
  internal: true,
  handler: (req, env, target) => poll(req, env, target.id as string),
};

/**
 * Runs a request exactly as it would have run at kick-off, inside the job's transaction (the
 * effect and the recorded result commit together), its writes with origin `job`.
 */
export function fhirRequestJob(env: FhirEnv): JobKind {
  return {
    run: async (_ctx, payload, tx) => {
      const res = await handle(payload as FhirRequest, { ...env, origin: 'job', repo: env.repo.on(tx) });
      return { status: res.status, body: res.body, headers: res.headers };
    },
    failed: (err) => (err instanceof OperationOutcomeError ? { status: err.status, body: err.outcome, headers: err.headers } : undefined),
    exhausted: () => ({ status: 500, body: outcome([issue('exception', 'The asynchronous request failed repeatedly; see the server log')]) }),
  };
}

/** Kick-off: the request runs later as a job, exactly as it would have run now. */
export async function startAsync(req: FhirRequest, env: FhirEnv): Promise<FhirResponse> {
  const payload: FhirRequest = { ...req, headers: { ...req.headers, prefer: withoutRespondAsync(req.headers.prefer) } };
  const id = await env.jobs.submit({ kind: FHIR_REQUEST_JOB, payload, owner: req.caller?.institution ?? null });
  const location = `${env.baseUrl}/_async/${id}`;
  return {
    status: 202,
    headers: { 'Content-Location': location },
    body: outcome([issue('informational', `Request accepted; poll ${location} for the result`, undefined, 'information')]),
  };
}

async function poll(req: FhirRequest, env: FhirEnv, id: string): Promise<FhirResponse> {
  // A replica that has not worked the queue yet starts now (and picks up abandoned jobs).
  void env.jobs.start();
  const job = await env.jobs.find(id);
  if (!job || job.state === 'cancelled' || !canSee(job.owner, req.caller)) throw notFound('async request', id);
  if (req.method === 'DELETE') {
    const state = await env.jobs.cancel(id);
    if (state === 'running') throw conflict(`Async request ${id} is running and can no longer be cancelled`);
    if (state === undefined || state === 'cancelled') throw notFound('async request', id);
    return { status: 202, body: outcome([issue('informational', `Async request ${id} cancelled`, undefined, 'information')]) };
  }
  if (job.state === 'queued' || job.state === 'running' || !job.result) return running(id, job.state);
  return { status: job.result.status, body: job.result.body as FhirResponse['body'], headers: finishedHeaders(job.result.headers) };
}

/**
 * A finished pending booking also answers 202, so "still running" is told by
 * its headers and body, always all three: Retry-After, X-Progress and an OperationOutcome.
 */
function running(id: string, state: string): FhirResponse {
  return {
    status: 202,
    headers: { 'Retry-After': String(RETRY_AFTER_S), 'X-Progress': state },
    body: outcome([issue('informational', `Async request ${id} is ${state}`, undefined, 'information')]),
  };
}

/** The job's own headers without the polling ones, so a finished answer never reads as running. */
function finishedHeaders(headers: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!headers) return undefined;
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !POLLING_HEADERS.has(name.toLowerCase())));
}

function withoutRespondAsync(prefer: string | undefined): string | undefined {
  const rest = (prefer ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p && p.toLowerCase() !== 'respond-async');
  return rest.length ? rest.join(', ') : undefined;
}
