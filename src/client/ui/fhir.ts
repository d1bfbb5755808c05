import type { Bundle, OperationOutcome, Resource } from '@medplum/fhirtypes';

/** How the page's server reaches the repository: the session's signing fetch. */
export type SignedFetch = (input: string, init?: RequestInit) => Promise<Response>;

/**
 * What the page tells the person, in their language, about a refusal this side makes: a stable
 * code and the values its sentence needs (instants stay ISO 8601; the page formats them in the
 * chosen time zone). The OperationOutcome beside it keeps the technical wording.
 */
export interface Reason {
  code: string;
  [value: string]: string | number | boolean | null | undefined;
}

/** The repository refused; `outcome` is its OperationOutcome (or one made from its error object). */
export class FhirError extends Error {
  constructor(
    readonly status: number,
    readonly outcome: OperationOutcome,
    readonly reason?: Reason,
  ) {
    super(outcome.issue?.map((i) => i.diagnostics ?? i.details?.text ?? i.code).join('; ') || `the repository answered ${status}`);
  }
}

/** An OperationOutcome of one issue, for errors this side finds itself. */
export function outcome(code: OperationOutcome['issue'][number]['code'], diagnostics: string, expression?: string): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code, diagnostics, ...(expression ? { expression: [expression] } : {}) }] };
}

/** A small FHIR client over the signed fetch: JSON in, JSON out, refusals as FhirError. */
export class Fhir {
  constructor(
    readonly base: string,
    private readonly fetch: SignedFetch,
  ) {}

  async request<T = Resource>(method: string, path: string, o: { body?: unknown; contentType?: string; ifMatch?: string } = {}): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/fhir+json' };
    if (o.body !== undefined) headers['content-type'] = o.contentType ?? 'application/fhir+json';
    if (o.ifMatch) headers['if-match'] = o.ifMatch;
    const res = await this.fetch(path ? `${this.base}/${path}` : this.base, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (res.status >= 400) throw new FhirError(res.status, asOutcome(res.status, json, text));
    return json as T;
  }

  read<T extends Resource>(type: string, id: string): Promise<T> {
    return this.request<T>('GET', `${type}/${encodeURIComponent(id)}`);
  }

  /** A search, following `next` links up to `max` resources of the searched type (includes kept). */
  async search(type: string, params: Record<string, string | string[]>, max = 2000): Promise<Resource[]> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) q.append(k, x);
    let bundle = await this.request<Bundle>('GET', `${type}?${q}`);
    const out: Resource[] = [];
    let matches = 0;
    for (;;) {
      for (const e of bundle.entry ?? []) {
        if (!e.resource) continue;
        out.push(e.resource);
        if (e.search?.mode !== 'include') matches++;
      }
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      if (!next || matches >= max) return out;
      const path = next.startsWith(this.base) ? next.slice(this.base.length + 1) : next;
      bundle = await this.request<Bundle>('GET', path);
    }
  }
}

function asOutcome(status: number, json: unknown, text: string): OperationOutcome {
  const o = json as { resourceType?: string; error?: string; error_description?: string } | undefined;
  if (o?.resourceType === 'OperationOutcome') return o as OperationOutcome;
  // The guard answers with its error object (docs/requirements.md#guard-error-object).
  if (o?.error) return outcome(status === 401 || status === 403 ? 'security' : 'processing', `${o.error}${o.error_description ? `: ${o.error_description}` : ''}`);
  return outcome('exception', `the repository answered ${status}${text ? `: ${text.slice(0, 200)}` : ''}`);
}
