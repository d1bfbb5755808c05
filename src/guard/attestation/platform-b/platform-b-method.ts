import type { PlatformBPackage } from '../../../config';
import type { AnchorSource } from '../../pki/anchor-source';
import type { AttestationMethod } from '../method';
import { platformBPostureVerifier, platformBRegistrationVerifier } from './platform-b';
import type { RevocationList } from './revocation-list';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/**
 * `platform_b` (Android key attestation): the key attestation chain at registration, only for the
 * packages of PLATFORM_B_PACKAGES; the attested key's signature as posture.
 */
export function platformBMethod(o: { anchors: AnchorSource; packages: readonly PlatformBPackage[]; revocations: RevocationList }): AttestationMethod {
  return {
    type: ATTESTATION_TYPE.platformB,
    hardware: true,
    fields: ['platform_b_key_attestation_certificate_chain', 'signed_hash_puk_client_sig', 'puk_ak_sig', 'platform_b_integrity_token'],
    userEmail: 'allowed',
    registration: o.packages.length > 0 ? platformBRegistrationVerifier(o.anchors, o.packages, o.revocations) : undefined,
    posture: platformBPostureVerifier,
  };
}
