import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { AccessScope, Repository } from '../store';

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

/** What handlers work with. */
export interface FhirEnv {
  ctx: AppContext;
  repo: Repository;
  /** `$PUBLIC_URL/fhir` */
  baseUrl: string;
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
