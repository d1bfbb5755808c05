import fs from 'node:fs';
import { scopeCovered } from '../../protocol/smart-scopes';
import { ConfigError } from '../../config';
import { allowedScopes, patientScopes } from './scopes';
import { isWorkloadInput, type PolicyData, type PolicyDecision, type PolicyEngine, type PolicyInput, type WorkloadPolicyInput } from './types';

/** Reasons worded like the gematik Rego policies. */
const REASONS = {
  profession: 'User profession is not allowed',
  product: 'Client product or version is not allowed',
  posture: 'Client posture type is not allowed',
  scopes: 'One or more requested scopes are not allowed',
  audiences: 'One or more requested audiences are not allowed',
  user: 'User is on the blocklist',
  ip: 'Source IP address is blocked',
  /** A TPM posture whose replayed PCRs match none of `tpm.pcr_baselines` (CONTRACT 7). */
  pcr: 'pcr_mismatch',
} as const;

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

/** Evaluates POLICY_FILE in process; policies/authz.rego is the same policy for OPA. */
export function embeddedPolicyEngine(data: PolicyData): PolicyEngine {
  return {
    kind: 'embedded',
    async decide(input: PolicyInput | WorkloadPolicyInput): Promise<PolicyDecision> {
      return isWorkloadInput(input) ? evaluateWorkload(data, input) : evaluate(data, input);
    },
  };
}

export function evaluate(data: PolicyData, input: PolicyInput): PolicyDecision {
  const reasons: string[] = [];
  const client = input.client_registration_data;
  const req = input.authorization_request;
  const patient = input.user_info.patient === true;
  // A patient has no profession: the patient scopes bound what they get instead.
  if (!patient && !data.professions.includes(input.user_info.professionOID)) reasons.push(REASONS.profession);
  if (!productAllowed(data, client.product_id, client.product_version)) reasons.push(REASONS.product);
  if (!data.posture_types.includes(client.posture_type)) reasons.push(REASONS.posture);
  const allowed = patient ? patientScopes(data) : allowedScopes(data, input.user_info.repository_owner);
  if (req.scopes.length === 0 || !req.scopes.every((s) => scopeCovered(s, allowed))) reasons.push(REASONS.scopes);
  if (data.audiences.length > 0 && !req.audience.every((a) => data.audiences.includes(a))) reasons.push(REASONS.audiences);
  if ((data.blocked_users ?? []).includes(input.user_info.identifier)) reasons.push(REASONS.user);
  if ((data.blocked_ips ?? []).includes(req.ip_address)) reasons.push(REASONS.ip);
  if (!pcrsMatchABaseline(data, client.attestation_result)) reasons.push(REASONS.pcr);
  if (reasons.length > 0) return { allow: false, reasons };
  return { allow: true, ttl: { ...data.token_ttl }, reasons: [] };
}

/** A workload: its scopes within `scopes.workload` (or the requestor scopes), its address not blocked, its subject not blocked. */
export function evaluateWorkload(data: PolicyData, input: WorkloadPolicyInput): PolicyDecision {
  const reasons: string[] = [];
  const req = input.authorization_request;
  const allowed = data.scopes.workload ?? data.scopes.requestor;
  if (req.scopes.length === 0 || !req.scopes.every((s) => scopeCovered(s, allowed))) reasons.push(REASONS.scopes);
  if (data.audiences.length > 0 && !req.audience.every((a) => data.audiences.includes(a))) reasons.push(REASONS.audiences);
  if ((data.blocked_users ?? []).includes(input.workload.sub)) reasons.push(REASONS.user);
  if ((data.blocked_ips ?? []).includes(req.ip_address)) reasons.push(REASONS.ip);
  if (reasons.length > 0) return { allow: false, reasons };
  return { allow: true, ttl: { access_token: data.token_ttl.access_token }, reasons: [] };
}

function productAllowed(data: PolicyData, productId: string, version: string): boolean {
  if (data.products.length === 0) return true;
  const p = data.products.find((x) => x.product_id === productId);
  return p !== undefined && (!p.versions || p.versions.length === 0 || p.versions.includes(version));
}

/**
 * `tpm.pcr_baselines`: a list of objects PCR index → lowercase hex value. Absent or empty: any PCR
 * values. Otherwise a TPM posture passes when every PCR named by one baseline has that value.
 */
function pcrsMatchABaseline(data: PolicyData, result: Record<string, unknown>): boolean {
  const baselines = data.tpm?.pcr_baselines ?? [];
  const tpm = result.tpm as { pcrs?: Record<string, string> } | undefined;
  if (!tpm || baselines.length === 0) return true;
  const pcrs = tpm.pcrs ?? {};
  return baselines.some((b) => Object.entries(b).every(([index, value]) => pcrs[index] === value.toLowerCase()));
}
