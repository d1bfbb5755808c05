import { AccessDenied } from '../errors';
import type { PolicyDecision, PolicyInput, WorkloadPolicyInput } from '../policy';
import type { GuardDeps } from './deps';

/** Asks the policy engine; a deny is 403 `access_denied` with the `reasons` echoed (gematik A_25752-01). */
export async function policyAllows(deps: GuardDeps, input: PolicyInput | WorkloadPolicyInput, deniedToken?: string): Promise<PolicyDecision> {
  const decision = await deps.policy.decide(input);
  if (!decision.allow) {
    const why = `denied by policy: ${decision.reasons.join('; ')}`;
    throw new AccessDenied(deniedToken ? `${deniedToken}: ${why}` : why, { extra: { reasons: decision.reasons } });
  }
  return decision;
}
