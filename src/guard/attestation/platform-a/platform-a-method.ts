import type { PlatformAAppId } from '../../../config';
import type { AnchorSource } from '../../pki/anchor-source';
import type { AttestationMethod } from '../method';
import { platformAPostureVerifier, platformARegistrationVerifier } from './platform-a';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/**
 * `platform_a` (Apple App Attest): the attestation object at registration, only for the App IDs
 * of PLATFORM_A_APP_IDS; an assertion with its counter as posture.
 */
export function platformAMethod(o: { anchors: AnchorSource; appIds: readonly PlatformAAppId[] }): AttestationMethod {
  return {
    type: ATTESTATION_TYPE.platformA,
    hardware: true,
    fields: ['platform_a_attestation_object', 'signed_hash_puk_client_sig', 'puk_ak_sig'],
    userEmail: 'allowed',
    registration: o.appIds.length > 0 ? platformARegistrationVerifier(o.anchors, o.appIds) : undefined,
    posture: platformAPostureVerifier,
  };
}
