import type { SharedState } from '../../state/shared-state';
import type { AttestationMethod } from '../method';
import { svcTokenRegistrationVerifier } from './register-svc-token';
import { TrustedIssuers } from './trusted-issuers';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/**
 * `svc_attestation_token`: registration by the service attestation token another guard issued
 * after the client's hardware attested there (only with TRUSTED_ATTESTATION_ISSUERS); no posture
 * of its own, its clients send another method's statement. A stationary client: no e-mail binding.
 */
export function svcTokenMethod(o: { trustedIssuers: string[]; state: SharedState; now: () => Date }): AttestationMethod {
  return {
    type: ATTESTATION_TYPE.svcAttestationToken,
    hardware: false,
    fields: ['svc_attestation_token', 'signed_hash_puk_client_sig'],
    userEmail: 'refused',
    registration: o.trustedIssuers.length > 0 ? svcTokenRegistrationVerifier(new TrustedIssuers(o.trustedIssuers, o.now), o.state) : undefined,
  };
}
