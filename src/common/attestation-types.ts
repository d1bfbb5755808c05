/**
 * The names a client and the authorization server exchange for an attestation method: the
 * `attestation_type` of dynamic client registration and the `posture_type` of the client
 * statement (gematik ZETA, docs/requirements.md, Hardware attestation), and the challenge type
 * of a TPM registration (`challenge_type` of the 202 answer, `verify_type` of /register/verify).
 */
export const ATTESTATION_TYPE = {
  software: 'software',
  tpm: 'tpm',
  platformA: 'platform_a',
  platformB: 'platform_b',
  svcAttestationToken: 'svc_attestation_token',
} as const;

/** TPM 2.0 credential activation to the EK (TPM2_ActivateCredential). */
export const TPM_ACTIVATION = 'tpm_activation';
