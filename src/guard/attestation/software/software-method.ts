import type { AttestationMethod } from '../method';
import { softwarePostureVerifier } from './verify-software-posture';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/**
 * `software`: nothing to prove at registration (gematik dcr-request.yaml, the software/legacy
 * form; a registration without `attestation_type` is one); the client statement binds key and
 * nonce. A phone app may bind an e-mail address with it.
 */
export const softwareMethod: AttestationMethod = {
  type: ATTESTATION_TYPE.software,
  hardware: false,
  fields: [],
  userEmail: 'allowed',
  registration: 'none',
  posture: softwarePostureVerifier,
};
