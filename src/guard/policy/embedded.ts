import fs from 'node:fs';
import { ConfigError } from '../../config';
import { callerKindOf } from './callers';
import { denies } from './checks';
import { RULES, TOKEN_LIFETIMES } from './rules';
import type { PolicyData, PolicyDecision, PolicyEngine, PolicyInput, WorkloadPolicyInput } from './types';

export function loadPolicyData(file: string): PolicyData {
  const data = JSON.parse(fs.readFileSync(file, 'utf8')) as PolicyData;
  const list = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');
  if (!list(data.professions) || !list(data.posture_types) || !Array.isArray(data.products) || !list(data.audiences)) {
    throw new ConfigError('POLICY_FILE', `${file}: professions, posture_types, products and audiences must be arrays`);
  }
  if (!data.scopes || !list(data.scopes.requestor) || !list(data.scopes.owner)) throw new ConfigError('POLICY_FILE', `${file}: scopes.requestor and scopes.owner must be arrays`);
  for (const k of ['workload', 'patient'] as const) if (data.scopes[k] !== undefined && !list(data.scopes[k])) throw new ConfigError('POLICY_FILE', `${file}: scopes.${k} must be an array`);
  if (!data.token_ttl || !(data.token_ttl.access_token > 0) || !(data.token_ttl.refresh_token > 0)) throw new ConfigError('POLICY_FILE', `${file}: token_ttl needs positive access_token and refresh_token`);
  const baselines = data.tpm?.pcr_baselines;
  const baselineOk = (b: unknown) =>
    typeof b === 'object' && b !== null && !Array.isArray(b) && Object.entries(b).every(([k, v]) => /^\d{1,2}$/.test(k) && typeof v === 'string' && /^[0-9a-fA-F]{64}$/.test(v));
  if (baselines !== undefined && (!Array.isArray(baselines) || !baselines.every(baselineOk))) {
    throw new ConfigError('POLICY_FILE', `${file}: tpm.pcr_baselines must be a list of objects mapping a PCR index to a 64-digit hex SHA-256 value`);
  }
  return data;
}

/** Evaluates POLICY_FILE in process over the rules of rules.ts, from which policies/authz.rego is generated. */
export function embeddedPolicyEngine(data: PolicyData): PolicyEngine {
  return {
    kind: 'embedded',
    async decide(input: PolicyInput | WorkloadPolicyInput): Promise<PolicyDecision> {
      return evaluate(data, input);
    },
  };
}

/** Every rule of the caller's kind, in table order: their reasons (each once), or allow with the token lifetimes. */
export function evaluate(data: PolicyData, input: PolicyInput | WorkloadPolicyInput): PolicyDecision {
  const caller = callerKindOf(input);
  const reasons: string[] = [];
  for (const rule of RULES) {
    if (rule.callers.includes(caller) && !reasons.includes(rule.reason) && denies(rule.check, data, input)) reasons.push(rule.reason);
  }
  if (reasons.length > 0) return { allow: false, reasons };
  return { allow: true, ttl: Object.fromEntries(TOKEN_LIFETIMES[caller].map((k) => [k, data.token_ttl[k]])), reasons: [] };
}
