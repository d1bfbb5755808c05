import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { Caller } from '../common/identity';
import type { Jobs } from '../jobs';
import type { AuditTrail, RequestAudit } from '../audit';
import type { Repository, WriteOrigin } from '../store';
import type { OperationRegistry } from './operations/registry';

export type { Caller } from '../common/identity';
export type { Interaction } from '../common/fhir-reach';

/** An HTTP-independent FHIR request: the same handler serves HTTP, Bundle entries and jobs. */
export interface FhirRequest {
  method: string;
  /** Path segments after the FHIR base, e.g. ['Slot', 'abc', '_history', '2']. */
  path: string[];
  query: [string, string][];
  body?: unknown;
  contentType?: string;
  headers: {
    ifMatch?: string;
    ifNoneExist?: string;
    prefer?: string;
  };
  caller?: Caller;
  /** Who asks and how the request is named, for its AuditEvents; absent: not recorded (imports, the server's own requests). */
  audit?: RequestAudit;
}

export interface FhirResponse {
  status: number;
  body?: Resource;
  headers?: Record<string, string>;
}

/** What handlers work with: one per application (app.ts composes it). */
export interface FhirEnv {
  ctx: AppContext;
  /** The store with the application's write interceptors. */
  repo: Repository;
  /** `$PUBLIC_URL/fhir` */
  baseUrl: string;
  /** Who the writes of this environment come from: `rest`, `import` or `job`. */
  origin: WriteOrigin;
  operations: OperationRegistry;
  /** The job queue that runs `Prefer: respond-async` requests. */
  jobs: Jobs;
  /** The audit trail every interaction is recorded in (fhir/audited.ts); none: nothing is recorded. */
  audit?: AuditTrail;
}

/** The repository writing for the request's caller, with the environment's origin. */
export function writerRepo(env: FhirEnv, req: FhirRequest): Repository {
  return env.repo.actingAs(env.origin, req.caller);
}

export function preferHeader(req: FhirRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.prefer ?? '').split(/[;,]/)) {
    const [k, v] = part.split('=').map((s) => s.trim());
    if (k) out[k.toLowerCase()] = (v ?? '').replace(/^"|"$/g, '');
  }
  return out;
}
