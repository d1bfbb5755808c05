import type { Config } from '../../config';
import { embeddedPolicyEngine, loadPolicyData } from './embedded';
import { opaPolicyEngine, opaReady } from './opa';
import type { PolicyData, PolicyEngine } from './types';

export type { PolicyData, PolicyDecision, PolicyEngine, PolicyInput, WorkloadPolicyInput } from './types';
export { isWorkloadInput } from './types';
export { allowedScopes, patientScopes } from './scopes';

/** POLICY_ENGINE_URL set: OPA; else the embedded engine over POLICY_FILE. */
export function createPolicyEngine(config: Config, data: PolicyData, timeoutMs: number): PolicyEngine {
  return config.policyEngineUrl ? opaPolicyEngine(config.policyEngineUrl, timeoutMs) : embeddedPolicyEngine(data);
}

export { loadPolicyData };

/** Whether the policy engine can decide now: the embedded one always can; OPA when its /health answers 200. */
export function policyEngineReady(config: Config, timeoutMs: number): Promise<boolean> {
  return config.policyEngineUrl ? opaReady(config.policyEngineUrl, timeoutMs) : Promise.resolve(true);
}
