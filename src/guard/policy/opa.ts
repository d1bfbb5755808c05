import { TemporarilyUnavailable } from '../errors';
import type { PolicyDecision, PolicyEngine, PolicyInput, WorkloadPolicyInput } from './types';

/**
 * OPA over its data API: POST `$POLICY_ENGINE_URL/v1/data/authz` with `{input}`,
 * result `{allow, ttl, reasons}`. Fails closed: unreachable, slow, non-200 or a result without
 * `allow` is 503 `temporarily_unavailable` (gematik: mandatory since helm 1.2.0).
 */
export function opaPolicyEngine(baseUrl: string, timeoutMs: number): PolicyEngine {
  const url = `${baseUrl.replace(/\/+$/, '')}/v1/data/authz`;
  return {
    kind: 'opa',
    async decide(input: PolicyInput | WorkloadPolicyInput): Promise<PolicyDecision> {
      let body: unknown;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ input }),
          signal: AbortSignal.timeout(timeoutMs),
        });
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        body = await res.json();
      } catch {
        throw new TemporarilyUnavailable('the policy engine is unavailable');
      }
      return parseDecision(body);
    },
  };
}

/** Accepts `result` as an object (reasons as array, map reason->true, or string) or a bare boolean (as Keycloak does). */
function parseDecision(body: unknown): PolicyDecision {
  const result = typeof body === 'object' && body !== null ? (body as { result?: unknown }).result : undefined;
  if (typeof result === 'boolean') return { allow: result, reasons: result ? [] : ['denied by policy'] };
  if (typeof result !== 'object' || result === null || typeof (result as { allow?: unknown }).allow !== 'boolean') {
    throw new TemporarilyUnavailable('the policy engine gave no decision');
  }
  const r = result as { allow: boolean; ttl?: unknown; reasons?: unknown };
  const reasons = Array.isArray(r.reasons)
    ? r.reasons.map(String)
    : typeof r.reasons === 'string'
      ? [r.reasons]
      : typeof r.reasons === 'object' && r.reasons !== null
        ? Object.keys(r.reasons)
        : [];
  const ttl = typeof r.ttl === 'object' && r.ttl !== null ? (r.ttl as { access_token?: unknown; refresh_token?: unknown }) : undefined;
  const positive = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);
  return {
    allow: r.allow,
    ttl: ttl ? { access_token: positive(ttl.access_token), refresh_token: positive(ttl.refresh_token) } : undefined,
    reasons: r.allow ? [] : reasons.length ? reasons : ['denied by policy'],
  };
}

/** OPA's own health endpoint (`GET /health`): 200 once its policies are loaded. */
export async function opaReady(baseUrl: string, timeoutMs: number): Promise<boolean> {
  try {
    const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}
