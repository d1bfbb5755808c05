import type { AnchorSource } from '../../pki/anchor-source';
import type { AttestationMethod } from '../method';
import { tpmRegistrationVerifier } from './register-tpm';
import { tpmPostureVerifier } from './verify-tpm-posture';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/**
 * `tpm`: registration by credential activation to the EK (registrations only with TPM
 * manufacturer CAs, `ekAnchors`), the quote of the registered AK as posture. A stationary client:
 * no e-mail binding.
 */
export function tpmMethod(ekAnchors: AnchorSource | undefined): AttestationMethod {
  return {
    type: ATTESTATION_TYPE.tpm,
    hardware: true,
    fields: ['puk_client_sig', 'puk_ak_sig', 'puk_ek_enc', 'c_ek_enc', 'tpm_ek_certificate_chain', 'signed_hash_puk_client_sig'],
    userEmail: 'refused',
    registration: ekAnchors ? tpmRegistrationVerifier(ekAnchors) : undefined,
    posture: tpmPostureVerifier,
  };
}
