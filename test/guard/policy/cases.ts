import type { CallerKind } from '../../../src/guard/policy/callers';
import type { PolicyData, PolicyInput, WorkloadPolicyInput } from '../../../src/guard/policy/types';

/**
 * The decisions of the access policy as a table. Jest runs each case against the embedded engine
 * (test/guard/policy-rules.test.ts); policies/authz_test.rego is generated from the same table, so
 * `opa test policies/` asks OPA with policies/authz.rego for the same decisions and reasons.
 */
export interface PolicyCase {
  name: string;
  caller: CallerKind;
  /** Merged into the caller's base input as Rego's `object.union` merges. */
  input?: Record<string, unknown>;
  /** Members of the data document that replace those of policies/default.json. */
  data?: Partial<PolicyData>;
  /** Reasons in rule order (the embedded engine's; OPA answers them as a set). */
  expect: { allow: true; ttl: { access_token: number; refresh_token?: number } } | { allow: false; reasons: string[] };
}

export const R = {
  profession: 'User profession is not allowed',
  product: 'Client product or version is not allowed',
  posture: 'Client posture type is not allowed',
  scopes: 'One or more requested scopes are not allowed',
  audiences: 'One or more requested audiences are not allowed',
  user: 'User is on the blocklist',
  ip: 'Source IP address is blocked',
  pcr: 'pcr_mismatch',
} as const;

const FHIR = 'http://localhost:8080/fhir';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** An institution's card on a practice system (gematik policy-engine-input.yaml v1.1). */
const institution: PolicyInput = {
  version: '1.1',
  client_registration_data: {
    client_id: 'c-1',
    product_id: 'terminus-client',
    product_version: '0.1.0',
    platform: 'linux',
    posture_type: 'software',
    registration_timestamp: 1767225600,
    attestation_timestamp: 1767225600,
    device_info: { os: 'Linux', os_version: '6.1' },
    attestation_result: { software: { arch: 'x64', binding_verified: true } },
  },
  user_info: { identifier: '1-2-PRAXIS', professionOID: '1.2.276.0.76.4.50', commonName: 'Praxis Dr. Test', repository_owner: false },
  authorization_request: {
    scopes: ['system/Slot.rs', 'system/Appointment.crus'],
    resource: FHIR,
    audience: [FHIR],
    grant_type: TOKEN_EXCHANGE,
    ip_address: '127.0.0.1',
    http_method: 'POST',
  },
  delegation_context: null,
};

/** A patient logged in at an IdP through an app: the KVNR, no profession. */
const patient: PolicyInput = {
  ...institution,
  user_info: { identifier: 'X485231029', professionOID: '', commonName: 'X485231029', repository_owner: false, patient: true },
  authorization_request: { ...institution.authorization_request, scopes: ['patient/Appointment.crus', 'patient/Slot.rs'], grant_type: 'authorization_code' },
};

/** A service's workload token exchanged for an access token. */
const workload: WorkloadPolicyInput = {
  version: '1.1',
  workload: { iss: 'https://idp.example.org', sub: 'svc-reminders', aud: [FHIR] },
  authorization_request: { scopes: ['system/Slot.rs'], resource: FHIR, audience: [FHIR], grant_type: TOKEN_EXCHANGE, ip_address: '10.0.0.7', http_method: 'POST' },
};

export const BASES: Readonly<Record<CallerKind, PolicyInput | WorkloadPolicyInput>> = { institution, patient, workload };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Rego's `object.union`: objects merge member by member, anything else on the right wins. */
export function union<T>(a: T, b: unknown): T {
  if (!isObject(a) || !isObject(b)) return b as T;
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in a ? union(a[k], v) : v;
  return out as T;
}

export function inputOf(c: PolicyCase): PolicyInput | WorkloadPolicyInput {
  return c.input ? union(BASES[c.caller], c.input) : BASES[c.caller];
}

const scopes = (s: string[]) => ({ authorization_request: { scopes: s } });
const ALLOWED = { allow: true, ttl: { access_token: 300, refresh_token: 86400 } } as const;
const denied = (...reasons: string[]) => ({ allow: false as const, reasons });

const hex = (first: string, rest: string) => first + rest.repeat(63);
/** A TPM posture whose replayed PCR 7 is `a0…0` and PCR 23 is `pcr23`. */
const tpm = (pcr23: string) => ({
  client_registration_data: { posture_type: 'tpm', attestation_result: { tpm: { pcrs: { '7': hex('a', '0'), '23': pcr23 }, quote_verified: true } } },
});
/** Written in capitals: a baseline matches the lowercase values the guard replays. */
const BASELINE = { '7': hex('A', '0'), '23': hex('b', 'b') };
const OTHER_BASELINE = { '7': hex('c', '0') };

const PRODUCTS = [{ product_id: 'terminus-client', versions: ['0.1.0'] }];
const REQUESTOR = ['system/CodeSystem.rs', 'system/Schedule.rs', 'system/Slot.rs', 'system/HealthcareService.rs', 'system/Practitioner.rs', 'system/Patient.cr', 'system/Appointment.crus', 'system/Subscription.cruds'];

export const CASES: readonly PolicyCase[] = [
  { name: 'a practice asking for requestor scopes is allowed', caller: 'institution', expect: ALLOWED },
  ...['50', '51', '52', '53', '54', '55'].map(
    (n): PolicyCase => ({ name: `profession 1.2.276.0.76.4.${n} is allowed`, caller: 'institution', input: { user_info: { professionOID: `1.2.276.0.76.4.${n}` } }, expect: ALLOWED }),
  ),
  { name: 'a card of another profession is denied', caller: 'institution', input: { user_info: { professionOID: '1.2.276.0.76.4.999' } }, expect: denied(R.profession) },
  { name: 'an unknown scope is denied', caller: 'institution', input: scopes(['invalid_scope_xyz']), expect: denied(R.scopes) },
  { name: 'asking for no scope is denied', caller: 'institution', input: scopes([]), expect: denied(R.scopes) },
  { name: 'a requestor may not ask for management scopes', caller: 'institution', input: scopes(['system/*.cruds']), expect: denied(R.scopes) },
  { name: 'a requestor may not create schedules', caller: 'institution', input: scopes(['system/Schedule.c']), expect: denied(R.scopes) },
  { name: 'a narrower permission is covered', caller: 'institution', input: scopes(['system/Appointment.rs', 'system/Subscription.c']), expect: ALLOWED },
  {
    name: 'a repository owner gets the management scopes',
    caller: 'institution',
    input: { user_info: { repository_owner: true }, ...scopes(['system/*.cruds', 'system/Schedule.cruds', 'system/Slot.u']) },
    expect: ALLOWED,
  },
  { name: 'a practice may not ask for patient scopes', caller: 'institution', input: scopes(['patient/Appointment.crus']), expect: denied(R.scopes) },
  { name: 'a scope with a lowercase type is not covered', caller: 'institution', input: scopes(['system/appointment.rs']), expect: denied(R.scopes) },
  { name: 'a scope without permissions is not covered', caller: 'institution', input: scopes(['system/Slot.']), expect: denied(R.scopes) },
  { name: 'a tpm posture is allowed', caller: 'institution', input: { client_registration_data: { posture_type: 'tpm' } }, expect: ALLOWED },
  { name: 'an unknown posture is denied', caller: 'institution', input: { client_registration_data: { posture_type: 'android' } }, expect: denied(R.posture) },
  {
    name: 'any product is allowed without a product list',
    caller: 'institution',
    input: { client_registration_data: { product_id: 'unknown_product', product_version: '99.99.99' } },
    expect: ALLOWED,
  },
  { name: 'a listed product and version is allowed', caller: 'institution', data: { products: PRODUCTS }, expect: ALLOWED },
  {
    name: 'another version of a listed product is denied',
    caller: 'institution',
    input: { client_registration_data: { product_version: '99.99.99' } },
    data: { products: PRODUCTS },
    expect: denied(R.product),
  },
  {
    name: 'a product off the list is denied',
    caller: 'institution',
    input: { client_registration_data: { product_id: 'unknown_product' } },
    data: { products: PRODUCTS },
    expect: denied(R.product),
  },
  {
    name: 'a product listed without versions admits any version',
    caller: 'institution',
    input: { client_registration_data: { product_version: '99.99.99' } },
    data: { products: [{ product_id: 'terminus-client' }] },
    expect: ALLOWED,
  },
  {
    name: 'an audience off the audience list is denied',
    caller: 'institution',
    input: { authorization_request: { audience: ['https://evil.example.com/api'] } },
    data: { audiences: [FHIR] },
    expect: denied(R.audiences),
  },
  { name: 'an audience on the audience list is allowed', caller: 'institution', data: { audiences: [FHIR] }, expect: ALLOWED },
  { name: 'a blocked Telematik-ID is denied', caller: 'institution', data: { blocked_users: ['1-2-PRAXIS'] }, expect: denied(R.user) },
  { name: 'a blocked address is denied', caller: 'institution', data: { blocked_ips: ['127.0.0.1'] }, expect: denied(R.ip) },
  {
    name: 'every failing rule gives its reason',
    caller: 'institution',
    input: { user_info: { professionOID: '1.2.276.0.76.4.999' }, client_registration_data: { posture_type: 'android' }, ...scopes(['invalid_scope_xyz']) },
    data: { blocked_ips: ['127.0.0.1'] },
    expect: denied(R.profession, R.posture, R.scopes, R.ip),
  },
  { name: 'tpm PCRs pass without baselines', caller: 'institution', input: tpm('cc'), expect: ALLOWED },
  { name: 'tpm PCRs matching a baseline pass', caller: 'institution', input: tpm(hex('b', 'b')), data: { tpm: { pcr_baselines: [BASELINE] } }, expect: ALLOWED },
  {
    name: 'tpm PCRs matching the second baseline pass',
    caller: 'institution',
    input: tpm('cc'),
    data: { tpm: { pcr_baselines: [BASELINE, { '7': hex('a', '0') }] } },
    expect: ALLOWED,
  },
  {
    name: 'tpm PCRs outside the baselines are denied',
    caller: 'institution',
    input: tpm('cc'),
    data: { tpm: { pcr_baselines: [BASELINE, OTHER_BASELINE] } },
    expect: denied(R.pcr),
  },
  { name: 'a software posture is not held to PCR baselines', caller: 'institution', data: { tpm: { pcr_baselines: [OTHER_BASELINE] } }, expect: ALLOWED },

  { name: 'a patient asking for patient scopes is allowed', caller: 'patient', expect: ALLOWED },
  { name: 'a patient may not ask for system scopes', caller: 'patient', input: scopes(['system/Slot.rs']), expect: denied(R.scopes) },
  { name: 'a patient may not delete appointments', caller: 'patient', input: scopes(['patient/Appointment.d']), expect: denied(R.scopes) },
  {
    name: 'without scopes.patient a patient gets the default patient scopes',
    caller: 'patient',
    input: scopes(['patient/Appointment.crus', 'patient/Patient.r', 'patient/CodeSystem.rs']),
    data: { scopes: { requestor: REQUESTOR, owner: ['system/*.cruds'] } },
    expect: ALLOWED,
  },
  {
    name: 'without scopes.patient a patient may not update their Patient',
    caller: 'patient',
    input: scopes(['patient/Patient.u']),
    data: { scopes: { requestor: REQUESTOR, owner: ['system/*.cruds'] } },
    expect: denied(R.scopes),
  },
  { name: 'a blocked KVNR is denied', caller: 'patient', data: { blocked_users: ['X485231029'] }, expect: denied(R.user) },
  { name: "a patient's app of an unknown posture is denied", caller: 'patient', input: { client_registration_data: { posture_type: 'android' } }, expect: denied(R.posture) },
  {
    name: "a patient's app off the product list is denied",
    caller: 'patient',
    input: { client_registration_data: { product_id: 'unknown_product' } },
    data: { products: PRODUCTS },
    expect: denied(R.product),
  },
  {
    name: 'a patient asking for an audience off the list is denied',
    caller: 'patient',
    input: { authorization_request: { audience: ['https://evil.example.com/api'] } },
    data: { audiences: [FHIR] },
    expect: denied(R.audiences),
  },
  { name: 'a patient from a blocked address is denied', caller: 'patient', data: { blocked_ips: ['127.0.0.1'] }, expect: denied(R.ip) },
  {
    name: "a patient's tpm PCRs outside the baselines are denied",
    caller: 'patient',
    input: tpm('cc'),
    data: { tpm: { pcr_baselines: [OTHER_BASELINE] } },
    expect: denied(R.pcr),
  },

  { name: 'a workload asking for requestor scopes is allowed', caller: 'workload', expect: { allow: true, ttl: { access_token: 300 } } },
  { name: 'a workload may not ask beyond the requestor scopes', caller: 'workload', input: scopes(['system/Schedule.c']), expect: denied(R.scopes) },
  { name: 'a workload asking for no scope is denied', caller: 'workload', input: scopes([]), expect: denied(R.scopes) },
  {
    name: 'scopes.workload bounds a workload',
    caller: 'workload',
    input: scopes(['system/Appointment.rs']),
    data: { scopes: { requestor: REQUESTOR, owner: ['system/*.cruds'], workload: ['system/Slot.rs'] } },
    expect: denied(R.scopes),
  },
  {
    name: 'scopes.workload admits its own scopes',
    caller: 'workload',
    input: scopes(['system/Slot.r']),
    data: { scopes: { requestor: REQUESTOR, owner: ['system/*.cruds'], workload: ['system/Slot.rs'] } },
    expect: { allow: true, ttl: { access_token: 300 } },
  },
  { name: 'a blocked workload subject is denied', caller: 'workload', data: { blocked_users: ['svc-reminders'] }, expect: denied(R.user) },
  { name: 'a workload from a blocked address is denied', caller: 'workload', data: { blocked_ips: ['10.0.0.7'] }, expect: denied(R.ip) },
  {
    name: 'a workload asking for an audience off the list is denied',
    caller: 'workload',
    input: { authorization_request: { audience: ['https://evil.example.com/api'] } },
    data: { audiences: [FHIR] },
    expect: denied(R.audiences),
  },
  {
    name: 'a workload is not held to the profession, product and posture rules',
    caller: 'workload',
    data: { professions: [], posture_types: [], products: PRODUCTS },
    expect: { allow: true, ttl: { access_token: 300 } },
  },
];
