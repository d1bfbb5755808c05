import type { Bundle, OperationOutcome, Resource } from '@medplum/fhirtypes';
import { AuditUnavailable, currentFrame, inFrame, mayHoldPatients, patientsInBundle, patientsOf, readAuditEvent, searchAuditEvents, type AuditAction, type AuditRecord, type AuditVisibility, type InteractionFrame } from '../audit';
import { KVID_SYSTEM } from '../common/vocabulary';
import { RETRY_AFTER_SECONDS } from '../common/retry-after';
import { issue, notSupported, OperationOutcomeError } from '../server-lib/outcomes';
import type { Route } from '../common/fhir-reach';
import type { FhirEnv, FhirRequest, FhirResponse } from './request';
import { parseSearch } from './search-request';

/** What each restful interaction does to data (BALP: Create, Read, Update, Delete, Query). */
const ACTIONS: Record<Route['interaction'], AuditAction> = {
  capabilities: 'E',
  read: 'R',
  vread: 'R',
  'history-instance': 'R',
  'search-type': 'E',
  create: 'C',
  update: 'U',
  patch: 'U',
  delete: 'D',
  transaction: 'E',
  batch: 'E',
  operation: 'E',
  'async-status': 'R',
};

/**
 * Interactions that write nothing: no write of theirs needs the frame. Entering one (an
 * AsyncLocalStorage) turns on Node's promise hooks for the whole process, a cost on every promise
 * after it; a server that only answers reads never pays it.
 */
const READS_ONLY = new Set<Route['interaction']>(['read', 'vread', 'history-instance', 'search-type']);

/**
 * Runs one interaction (a request, a Bundle entry, a job) and records it (docs/architecture.md,
 * Audit trail): its writes store their AuditEvents in their own transactions (the audit trail's
 * write observer); an interaction that wrote nothing (a read, a search, a refusal, a failure) is
 * recorded here once it has an answer, one AuditEvent per patient in the answer (BALP Patient
 * variants). With AUDIT_MODE=sync the answer waits for the record, and an access whose record
 * cannot be stored is answered 503 instead.
 */
export async function audited(req: FhirRequest, env: FhirEnv, r: Route, run: () => Promise<FhirResponse>): Promise<FhirResponse> {
  const trail = env.audit;
  const request = req.audit ?? currentFrame()?.request;
  if (!trail?.enabled || !request || r.interaction === 'capabilities') return run();
  const frame: InteractionFrame = { request, operation: r.operation, writes: 0 };
  let response: FhirResponse;
  try {
    response = await (READS_ONLY.has(r.interaction) ? run() : inFrame(frame, run));
  } catch (err) {
    // A failure returned no data: it is recorded without holding the answer (the store may be what
    // failed, and a 503 must come within its bound); inside a transaction the outer request records it.
    if (!(err instanceof AuditUnavailable) && !env.repo.db.inTransaction) void trail.record([failureRecord(env, frame, req, r, err)]).catch(() => undefined);
    throw err instanceof AuditUnavailable ? unaudited() : err;
  }
  // A transaction's or batch's entries were recorded one by one; writes recorded themselves.
  if (frame.writes > 0 || r.interaction === 'transaction' || r.interaction === 'batch') return response;
  try {
    await store(env, answerRecords(env, frame, req, r, response));
  } catch (err) {
    if (err instanceof AuditUnavailable) throw unaudited();
    throw err;
  }
  return response;
}

/** Inside a transaction (a transaction Bundle's entries, a job) the records go into it; else through the group commit. */
async function store(env: FhirEnv, records: AuditRecord[]): Promise<void> {
  const trail = env.audit!;
  if (env.repo.db.inTransaction) {
    for (const record of records) await trail.recordInTransaction(env.repo.db, record);
    return;
  }
  await trail.record(records);
}

function unaudited(): OperationOutcomeError {
  return new OperationOutcomeError(503, [issue('transient', 'The access cannot be recorded in the audit trail (AUDIT_MODE=sync), so it is refused; retry later')], {
    'Retry-After': RETRY_AFTER_SECONDS.storeUnavailable,
  });
}

/** The request line a query entity carries: method, path and query below the server root; never a body or a header. */
function requestLine(req: FhirRequest): string {
  const query = req.query.length ? `?${new URLSearchParams(req.query).toString()}` : '';
  return `${req.method} /fhir/${req.path.join('/')}${query}`;
}

function base(frame: InteractionFrame, r: Route): Omit<AuditRecord, 'id' | 'recorded' | 'source' | 'entities' | 'outcome'> {
  return { kind: 'rest', subtype: r.interaction, operation: r.operation, action: ACTIONS[r.interaction], parties: frame.request.parties, requestId: frame.request.requestId, traceId: frame.request.traceId };
}

/** The records of an answer: one per patient it holds (or one without a patient), naming what was read. */
function answerRecords(env: FhirEnv, frame: InteractionFrame, req: FhirRequest, r: Route, response: FhirResponse): AuditRecord[] {
  const trail = env.audit!;
  const body = response.body;
  const isBundle = body?.resourceType === 'Bundle';
  const entities: string[] = [];
  if (body && !isBundle && body.resourceType !== 'OperationOutcome' && body.id && r.type !== 'AuditEvent') {
    entities.push(body.meta?.versionId ? `${body.resourceType}/${body.id}/_history/${body.meta.versionId}` : `${body.resourceType}/${body.id}`);
  } else if (r.type && r.id) entities.push(`${r.type}/${r.id}`);
  const patients = r.type === 'AuditEvent' ? [] : isBundle ? (onlyOfType(req, r) ? [] : patientsInBundle(body as Bundle)) : patientsOf(body as Resource | undefined);
  const query = r.interaction === 'search-type' || r.interaction === 'operation' || r.interaction === 'history-instance' ? requestLine(req) : undefined;
  const outcome = response.status >= 500 ? '8' : response.status >= 400 ? '4' : '0';
  // A Bundle names its patients; of its resources only the one a history is of.
  const fields = { ...base(frame, r), outcome: outcome as '0' | '4' | '8', entities: isBundle && !r.id ? [] : entities, query };
  if (patients.length === 0) return [trail.newRecord(fields)];
  return patients.map((patient) => trail.newRecord({ ...fields, patient }));
}

/** A search of a type without patients that includes no other resources: its answer names no patient (the common slot search). */
function onlyOfType(req: FhirRequest, r: Route): boolean {
  return r.interaction === 'search-type' && r.type !== undefined && !mayHoldPatients(r.type) && !req.query.some(([name]) => name.startsWith('_include') || name.startsWith('_revinclude'));
}

function failureRecord(env: FhirEnv, frame: InteractionFrame, req: FhirRequest, r: Route, err: unknown): AuditRecord {
  const status = err instanceof OperationOutcomeError ? err.status : 500;
  const first = err instanceof OperationOutcomeError ? (err.outcome as OperationOutcome).issue?.[0] : undefined;
  return env.audit!.newRecord({
    ...base(frame, r),
    outcome: status >= 500 ? '8' : '4',
    outcomeDesc: `${status}${first ? ` ${first.code}: ${first.diagnostics ?? ''}` : ''}`.trim(),
    entities: r.type && r.id ? [`${r.type}/${r.id}`] : [],
    query: requestLine(req),
  });
}

/**
 * AuditEvent through the FHIR API: read and search, nothing else (the trail is written by the
 * server alone). Owners see every event, a patient the events about their own Patient resources,
 * anyone else none; without a caller (GUARD_ENFORCEMENT=off) the repository itself asks.
 */
export async function auditEventInteraction(req: FhirRequest, env: FhirEnv, r: Route): Promise<FhirResponse> {
  if (r.interaction !== 'read' && r.interaction !== 'search-type') {
    throw notSupported(`AuditEvent is written by the server alone: ${r.interaction} is not allowed (read and search only)`, 405);
  }
  // The repository's Db: a transaction's when the request is one of its entries (an embedded store has one connection).
  const db = env.repo.db;
  const visibility = await auditVisibility(req, env);
  if (r.interaction === 'read') return { status: 200, body: await readAuditEvent(db, r.id!, visibility) };
  const self = `${env.baseUrl}/AuditEvent${req.query.length ? `?${new URLSearchParams(req.query).toString()}` : ''}`;
  return { status: 200, body: await searchAuditEvents(db, req.query, visibility, { self, base: env.baseUrl }) };
}

async function auditVisibility(req: FhirRequest, env: FhirEnv): Promise<AuditVisibility> {
  const caller = req.caller;
  if (!caller || caller.isOwner) return { all: true };
  if (caller.patient === undefined) return { patients: [] };
  // The patient's own Patient resources: those carrying their KVNR (the store's visibility rule, server-lib/owner.ts).
  const { request } = parseSearch('Patient', [['identifier', `${KVID_SYSTEM}|${caller.patient}`], ['_count', '1000']]);
  const found = await env.repo.search(request, caller);
  return { patients: found.resources.map((p) => `Patient/${p.id}`) };
}
