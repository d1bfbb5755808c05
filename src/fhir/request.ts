import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { Jobs } from '../jobs';
import type { AccessScope, Repository, WriteOrigin } from '../store';
import type { OperationRegistry } from './operations/registry';

/** The verified caller, set by the enforcement proxy; absent: the repository itself. */
export interface RequestIdentity {
  /** Telematik-ID of the institution (subject of the access token). */
  institution: string;
  professionOid?: string;
  clientId?: string;
  /** SMART v2 scopes granted (`system/Appointment.crus`, ...). */
  scopes: string[];
  /** Repository owners see and manage everything (CONTRACT section 4). */
  isOwner: boolean;
}

export type Interaction =
  | 'read'
  | 'vread'
  | 'history-instance'
  | 'search-type'
  | 'create'
  | 'update'
  | 'patch'
  | 'delete'
  | 'transaction'
  | 'batch'
  | 'operation'
  | 'async-status'
  | 'capabilities';

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
  identity?: RequestIdentity;
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
}

/** The repository writing for the request's caller, with the environment's origin. */
export function writerRepo(env: FhirEnv, req: FhirRequest): Repository {
  return env.repo.actingAs(env.origin, req.identity);
}

export function scopeOf(identity?: RequestIdentity): AccessScope | undefined {
  return identity ? { institution: identity.institution, seesAll: identity.isOwner } : undefined;
}

export function preferHeader(req: FhirRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.prefer ?? '').split(/[;,]/)) {
    const [k, v] = part.split('=').map((s) => s.trim());
    if (k) out[k.toLowerCase()] = (v ?? '').replace(/^"|"$/g, '');
  }
  return out;
}
