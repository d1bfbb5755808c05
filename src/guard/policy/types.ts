/**
 * Input of the policy decision (gematik policy-engine-input.yaml v1.1), the same for the embedded
 * engine and OPA. `user_info.repository_owner` is Terminus' own
 * member: whether the Telematik-ID is one of REPOSITORY_OWNERS.
 */
export interface PolicyInput {
  version: '1.1';
  client_registration_data: {
    client_id: string;
    product_id: string;
    product_version: string;
    platform: string;
    posture_type: string;
    registration_timestamp: number;
    attestation_timestamp: number;
    device_info: { os: string; os_version: string };
    attestation_result: Record<string, unknown>;
  };
  user_info: {
    identifier: string;
    professionOID: string;
    commonName: string;
    organizationName?: string;
    repository_owner: boolean;
    /** A patient logged in at an IdP (docs/requirements.md, Patients (authorization code flow)): `identifier` is the KVNR, there is no profession. */
    patient?: boolean;
  };
  authorization_request: AuthorizationRequest;
  delegation_context: null;
}

/** What is asked for (gematik policy-engine-input.yaml `authorization_request`). */
export interface AuthorizationRequest {
  scopes: string[];
  resource: string;
  audience: string[];
  grant_type: string;
  ip_address: string;
  previous_ip_address?: string;
  http_method: string;
}

/**
 * Input of a workload token exchange (ZETA service-to-service; docs/requirements.md, Workload token exchange): the workload the
 * token names instead of a registered client and a user.
 */
export interface WorkloadPolicyInput {
  version: '1.1';
  workload: { iss: string; sub: string; aud: string[] };
  authorization_request: AuthorizationRequest;
}

export function isWorkloadInput(input: PolicyInput | WorkloadPolicyInput): input is WorkloadPolicyInput {
  return 'workload' in input;
}

/** Output (gematik pdp-decision.yaml `result`): `reasons` normalised to an array of strings. */
export interface PolicyDecision {
  allow: boolean;
  ttl?: { access_token?: number; refresh_token?: number };
  reasons: string[];
}

/** One interface for the embedded engine and OPA over HTTP. */
export interface PolicyEngine {
  readonly kind: 'embedded' | 'opa';
  decide(input: PolicyInput | WorkloadPolicyInput): Promise<PolicyDecision>;
}

/** The data document of POLICY_FILE (policies/default.json); OPA loads the same file as data. */
export interface PolicyData {
  professions: string[];
  posture_types: string[];
  /** Empty: any product. Otherwise allowed products, each with allowed versions (empty: any). */
  products: { product_id: string; versions?: string[] }[];
  /** Empty: only this server's resource (the AS checks `resource` itself). */
  audiences: string[];
  /** `workload`: what workload tokens may be exchanged for (absent: the requestor scopes). */
  scopes: { requestor: string[]; owner: string[]; workload?: string[]; patient?: string[] };
  token_ttl: { access_token: number; refresh_token: number };
  blocked_users?: string[];
  blocked_ips?: string[];
  /** TPM postures: replayed PCR values (index → lowercase hex) must match one baseline; absent or empty: any. */
  tpm?: { pcr_baselines?: Record<string, string>[] };
}
