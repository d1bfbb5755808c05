import { scopeCovered } from '../../common/smart-scopes';
import { callerKindOf } from './callers';
import { allowedScopes, DEFAULT_PATIENT_SCOPES, patientScopes, workloadScopes } from './scopes';
import type { PolicyData, PolicyInput, WorkloadPolicyInput } from './types';

type Input = PolicyInput | WorkloadPolicyInput;

/** A member of the input by its dotted path (gematik policy-engine-input v1.1 names). */
export type InputPath =
  | 'user_info.professionOID'
  | 'user_info.identifier'
  | 'client_registration_data.posture_type'
  | 'authorization_request.audience'
  | 'authorization_request.ip_address'
  | 'workload.sub';

/** A list of the data document (POLICY_FILE); an absent one counts as empty. */
export type DataList = 'professions' | 'posture_types' | 'audiences' | 'blocked_users' | 'blocked_ips';

/** What a rule of the policy checks. */
export type Check =
  /** The input's value is one of the list's. */
  | { kind: 'listed'; value: InputPath; list: DataList }
  /** The input's value is none of the list's. */
  | { kind: 'unlisted'; value: InputPath; list: DataList }
  /** Every value of the input's array is one of the list's; an empty list admits any. */
  | { kind: 'all-listed'; values: InputPath; list: DataList }
  /** The client product and version are on `products` (empty: any product). */
  | { kind: 'product' }
  /** Some scope is asked for, and every one is covered by the caller's scopes (SMART v2). */
  | { kind: 'scopes' }
  /** A TPM posture's replayed PCRs match one of `tpm.pcr_baselines` (none: any values). */
  | { kind: 'pcr-baseline' };

type Kind = Check['kind'];

/**
 * How a kind of check decides, in TypeScript for the embedded engine and in Rego for
 * policies/authz.rego, side by side: a change to one is made beside the other.
 */
interface CheckKind<C extends Check> {
  /** Whether `check` denies `input` over `data`. */
  denies(check: C, data: PolicyData, input: Input): boolean;
  /** The same in Rego: bodies of `reasons contains <reason> if { … }`, any one of which denies. */
  rego(check: C): string[][];
  /** Rego rules and functions the bodies use, written once however many rules use the kind. */
  helpers?: readonly string[];
}

function at(input: Input, path: InputPath): unknown {
  return path.split('.').reduce<unknown>((o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined), input);
}

const listOf = (data: PolicyData, name: DataList): readonly unknown[] => data[name] ?? [];
const regoList = (name: DataList) => `object.get(data, "${name}", [])`;

const listed: CheckKind<Extract<Check, { kind: 'listed' }>> = {
  denies: (c, data, input) => !listOf(data, c.list).includes(at(input, c.value)),
  rego: (c) => [[`not input.${c.value} in ${regoList(c.list)}`]],
};

const unlisted: CheckKind<Extract<Check, { kind: 'unlisted' }>> = {
  denies: (c, data, input) => listOf(data, c.list).includes(at(input, c.value)),
  rego: (c) => [[`input.${c.value} in ${regoList(c.list)}`]],
};

const allListed: CheckKind<Extract<Check, { kind: 'all-listed' }>> = {
  denies(c, data, input) {
    const list = listOf(data, c.list);
    return list.length > 0 && !(at(input, c.values) as unknown[]).every((v) => list.includes(v));
  },
  rego: (c) => [[`count(${regoList(c.list)}) > 0`, `some v in input.${c.values}`, `not v in ${regoList(c.list)}`]],
};

const product: CheckKind<Extract<Check, { kind: 'product' }>> = {
  denies(_c, data, input) {
    const client = (input as Partial<PolicyInput>).client_registration_data;
    if (data.products.length === 0) return false;
    const p = data.products.find((x) => x.product_id === client?.product_id);
    return p === undefined || (p.versions !== undefined && p.versions.length > 0 && !p.versions.includes(client?.product_version ?? ''));
  },
  rego: () => [['not product_allowed']],
  helpers: [
    'product_allowed if count(data.products) == 0',
    '',
    'product_allowed if {',
    '\tsome p in data.products',
    '\tp.product_id == input.client_registration_data.product_id',
    '\tversion_allowed(p)',
    '}',
    '',
    'version_allowed(p) if count(object.get(p, "versions", [])) == 0',
    '',
    'version_allowed(p) if input.client_registration_data.product_version in p.versions',
  ],
};

function scopesOf(data: PolicyData, input: Input): string[] {
  const caller = callerKindOf(input);
  if (caller === 'workload') return workloadScopes(data);
  return caller === 'patient' ? patientScopes(data) : allowedScopes(data, (input as PolicyInput).user_info.repository_owner);
}

const scopes: CheckKind<Extract<Check, { kind: 'scopes' }>> = {
  denies(_c, data, input) {
    const asked = input.authorization_request.scopes;
    const allowed = scopesOf(data, input);
    return asked.length === 0 || !asked.every((s) => scopeCovered(s, allowed));
  },
  rego: () => [
    ['count(input.authorization_request.scopes) == 0'],
    ['some s in input.authorization_request.scopes', 'not scope_allowed(s)'],
  ],
  helpers: [
    '# The scopes of the caller (src/guard/policy/scopes.ts): scopes.requestor, and scopes.owner',
    '# too for REPOSITORY_OWNERS; scopes.patient; scopes.workload, else scopes.requestor.',
    'allowed_scopes := data.scopes.requestor if {',
    '\tis_institution',
    '\tnot input.user_info.repository_owner',
    '}',
    '',
    'allowed_scopes := array.concat(data.scopes.requestor, data.scopes.owner) if {',
    '\tis_institution',
    '\tinput.user_info.repository_owner',
    '}',
    '',
    'allowed_scopes := object.get(data.scopes, "patient", default_patient_scopes) if is_patient',
    '',
    'allowed_scopes := object.get(data.scopes, "workload", data.scopes.requestor) if is_workload',
    '',
    '# What a patient may get when the data document names no scopes.patient.',
    'default_patient_scopes := [',
    ...DEFAULT_PATIENT_SCOPES.map((s) => `\t${JSON.stringify(s)},`),
    ']',
    '',
    'scope_allowed(s) if s in allowed_scopes',
    '',
    '# SMART v2 (src/common/smart-scopes.ts): system/Appointment.rs is covered by system/*.cruds',
    '# or system/Appointment.crus: the same context, the same or a wildcard type, and every',
    '# requested permission letter among the allowed ones.',
    'scope_allowed(s) if {',
    '\t[rctx, rtype, rperms] := smart_scope(s)',
    '\tsome a in allowed_scopes',
    '\t[actx, atype, aperms] := smart_scope(a)',
    '\tactx == rctx',
    '\tatype in {"*", rtype}',
    '\tevery c in split(rperms, "") {',
    '\t\tcontains(aperms, c)',
    '\t}',
    '}',
    '',
    'smart_scope(s) := [m[0][1], m[0][2], m[0][3]] if {',
    '\tm := regex.find_all_string_submatch_n(`^(system|patient)/(\\*|[A-Z][A-Za-z]+)\\.(c?r?u?d?s?)$`, s, 1)',
    '\tcount(m) == 1',
    '\tm[0][3] != ""',
    '}',
  ],
};

/**
 * `tpm.pcr_baselines`: a list of objects PCR index → hex value. Absent or empty: any PCR values.
 * Otherwise a TPM posture passes when every PCR named by one baseline has that value (lowercase).
 */
const pcrBaseline: CheckKind<Extract<Check, { kind: 'pcr-baseline' }>> = {
  denies(_c, data, input) {
    const baselines = data.tpm?.pcr_baselines ?? [];
    const tpm = (input as Partial<PolicyInput>).client_registration_data?.attestation_result.tpm as { pcrs?: Record<string, string> } | undefined;
    if (!tpm || baselines.length === 0) return false;
    const pcrs = tpm.pcrs ?? {};
    return !baselines.some((b) => Object.entries(b).every(([index, value]) => pcrs[index] === value.toLowerCase()));
  },
  rego: () => [
    [
      'tpm := input.client_registration_data.attestation_result.tpm',
      'count(object.get(data, ["tpm", "pcr_baselines"], [])) > 0',
      'not pcr_baseline_matched(tpm)',
    ],
  ],
  helpers: [
    'pcr_baseline_matched(tpm) if {',
    '\tsome b in data.tpm.pcr_baselines',
    '\tevery index, value in b {',
    '\t\tobject.get(tpm, ["pcrs", index], "") == lower(value)',
    '\t}',
    '}',
  ],
};

const KINDS: { [K in Kind]: CheckKind<Extract<Check, { kind: K }>> } = {
  listed,
  unlisted,
  'all-listed': allListed,
  product,
  scopes,
  'pcr-baseline': pcrBaseline,
};

const kindOf = (check: Check) => KINDS[check.kind] as CheckKind<Check>;

export function denies(check: Check, data: PolicyData, input: Input): boolean {
  return kindOf(check).denies(check, data, input);
}

export function checkRego(check: Check): string[][] {
  return kindOf(check).rego(check);
}

/** The Rego helpers of the kinds among `checks`, each once, in the order the kinds first occur. */
export function helpersRego(checks: readonly Check[]): string[][] {
  const kinds = [...new Set(checks.map((c) => c.kind))];
  return kinds.flatMap((k) => (KINDS[k].helpers ? [[...KINDS[k].helpers]] : []));
}
