import type { CallerKind } from './callers';
import type { Check } from './checks';

/** One rule of the access policy: the reason a deny carries, whom it applies to, what it checks. */
export interface PolicyRule {
  /** Worded like the gematik Rego policies (pdp-decision.yaml `reasons`). */
  reason: string;
  /** Why the rule exists; written above the rule in policies/authz.rego too. */
  why: string;
  callers: readonly CallerKind[];
  check: Check;
}

/**
 * The access policy, the one place its rules are written. The embedded engine (embedded.ts)
 * evaluates these rows in this order, and policies/authz.rego is generated from them
 * (`npm run policy:rego`, rego.ts), so both engines deny for the same reasons. A new rule is a
 * row here; a new kind of check is one entry of checks.ts, in TypeScript and in Rego.
 */
export const RULES: readonly PolicyRule[] = [
  {
    reason: 'User profession is not allowed',
    why: "The card's professionOID must be one of `professions`; a patient has no profession.",
    callers: ['institution'],
    check: { kind: 'listed', value: 'user_info.professionOID', list: 'professions' },
  },
  {
    reason: 'Client product or version is not allowed',
    why: 'An empty `products` admits any product; a product without `versions` any version.',
    callers: ['institution', 'patient'],
    check: { kind: 'product' },
  },
  {
    reason: 'Client posture type is not allowed',
    why: "The client's posture type (how it attested itself) must be one of `posture_types`.",
    callers: ['institution', 'patient'],
    check: { kind: 'listed', value: 'client_registration_data.posture_type', list: 'posture_types' },
  },
  {
    reason: 'One or more requested scopes are not allowed',
    why: "At least one scope, each covered by the caller's scopes (`scopes.requestor` and, for REPOSITORY_OWNERS, `scopes.owner`; `scopes.patient`; `scopes.workload`).",
    callers: ['institution', 'patient', 'workload'],
    check: { kind: 'scopes' },
  },
  {
    reason: 'One or more requested audiences are not allowed',
    why: "An empty `audiences` means this server's resource only, which the authorization server checks itself.",
    callers: ['institution', 'patient', 'workload'],
    check: { kind: 'all-listed', values: 'authorization_request.audience', list: 'audiences' },
  },
  {
    reason: 'User is on the blocklist',
    why: 'A Telematik-ID or KVNR on `blocked_users` gets no token.',
    callers: ['institution', 'patient'],
    check: { kind: 'unlisted', value: 'user_info.identifier', list: 'blocked_users' },
  },
  {
    reason: 'User is on the blocklist',
    why: "A workload's subject on `blocked_users` gets no token.",
    callers: ['workload'],
    check: { kind: 'unlisted', value: 'workload.sub', list: 'blocked_users' },
  },
  {
    reason: 'Source IP address is blocked',
    why: "The client's address (as TRUST_PROXY resolves it) on `blocked_ips` gets no token.",
    callers: ['institution', 'patient', 'workload'],
    check: { kind: 'unlisted', value: 'authorization_request.ip_address', list: 'blocked_ips' },
  },
  {
    reason: 'pcr_mismatch',
    why: "A TPM posture's replayed PCRs must match one of `tpm.pcr_baselines` (PCR index to hex SHA-256); none listed admits any values.",
    callers: ['institution', 'patient'],
    check: { kind: 'pcr-baseline' },
  },
];

type Lifetime = 'access_token' | 'refresh_token';

/**
 * The token lifetimes of an allow (gematik A_28527), from `token_ttl`: a workload gets no refresh
 * token, it exchanges its own token again (RFC 8693 token exchange).
 */
export const TOKEN_LIFETIMES: Readonly<Record<CallerKind, readonly Lifetime[]>> = {
  institution: ['access_token', 'refresh_token'],
  patient: ['access_token', 'refresh_token'],
  workload: ['access_token'],
};
