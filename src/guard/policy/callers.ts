import { isWorkloadInput, type PolicyInput, type WorkloadPolicyInput } from './types';

/**
 * The kind of caller a policy input is about: an institution's card (gematik policy-engine-input
 * v1.1), a patient logged in at an IdP (`user_info.patient`: a KVNR, no profession) or a service's
 * workload token (`workload` instead of a client and a user). A rule names the kinds it applies to.
 */
export type CallerKind = 'institution' | 'patient' | 'workload';

export const CALLER_KINDS: readonly CallerKind[] = ['institution', 'patient', 'workload'];

export function callerKindOf(input: PolicyInput | WorkloadPolicyInput): CallerKind {
  if (isWorkloadInput(input)) return 'workload';
  return input.user_info.patient === true ? 'patient' : 'institution';
}

/** `callerKindOf` in Rego: one rule per kind, exactly one of them true for an input. */
export const CALLER_REGO = [
  'is_workload if input.workload',
  '',
  'is_patient if {',
  '\tnot is_workload',
  '\tinput.user_info.patient == true',
  '}',
  '',
  'is_institution if {',
  '\tnot is_workload',
  '\tnot is_patient',
  '}',
];

/** The Rego conditions that limit a rule to the kinds `callers`: none for all of them. */
export function callerConditions(callers: readonly CallerKind[]): string[] {
  const excluded = CALLER_KINDS.filter((c) => !callers.includes(c));
  if (excluded.length === 0) return [];
  return callers.length === 1 ? [`is_${callers[0]}`] : excluded.map((c) => `not is_${c}`);
}
