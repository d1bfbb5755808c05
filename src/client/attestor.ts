import os from 'node:os';
import type { AttestationHelperClient } from '../attestation-helper';
import { attestationChallenge } from '../common/attestation-challenge';
import { canonicalEcJwk } from '../common/canonical-jwk';
import { DEFAULT_PRODUCT, platformOf, softwareClientStatement, type ProductInfo } from './client-statement';
import type { EcKey } from './crypto';
import { ATTESTATION_TYPE, TPM_ACTIVATION } from '../common/attestation-types';

/**
 * How a client proves its integrity: the members its registration adds, the answer to a
 * registration challenge, and the client statement of each token exchange.
 */
export interface Attestor {
  readonly attestationType: 'software' | 'tpm';
  /** Members added to the registration body (besides jwks, grant types, ...). */
  registrationMembers(clientKey: EcKey): Promise<Record<string, unknown>>;
  /** The /register/verify body for a 202 answer. */
  answerChallenge(pending: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** The client statement of a token exchange with this nonce. */
  clientStatement(o: { clientId: string; clientKey: EcKey; nonce: string; now: number }): Promise<Record<string, unknown>>;
}

/** The software posture: no hardware, the statement binds the client key and the nonce. */
export function softwareAttestor(product: ProductInfo = DEFAULT_PRODUCT): Attestor {
  return {
    attestationType: ATTESTATION_TYPE.software,
    registrationMembers: async () => ({ attestation_type: ATTESTATION_TYPE.software }),
    answerChallenge: async () => {
      throw new Error('a software registration has no challenge');
    },
    clientStatement: async (o) => softwareClientStatement({ ...o, product }),
  };
}

/** RFC 7638 canonical JWK of the client key: what the AK signs at registration. */
export function canonicalJwk(key: EcKey): Buffer {
  return canonicalEcJwk(key.publicJwk);
}

/**
 * The TPM posture through the attestation helper (docs/requirements.md#hardware-attestation,
 * #attestation-helper-grpc): the helper's setup service gives the EK, its certificate, the AK and
 * the AK's signature over the client key, and activates the credential of the 202 answer;
 * GetAttestation quotes PCR 7 and 23 over the attestation challenge.
 */
export function helperAttestor(helper: AttestationHelperClient, product: ProductInfo = DEFAULT_PRODUCT): Attestor {
  let material: Awaited<ReturnType<AttestationHelperClient['getRegistrationMaterial']>> | undefined;
  return {
    attestationType: ATTESTATION_TYPE.tpm,
    async registrationMembers(clientKey) {
      material = await helper.getRegistrationMaterial(canonicalJwk(clientKey));
      return {
        attestation_type: ATTESTATION_TYPE.tpm,
        puk_ek_enc: material.ek_public.toString('base64'),
        c_ek_enc: material.ek_certificate.toString('base64'),
        puk_ak_sig: material.ak_public.toString('base64'),
        signed_hash_puk_client_sig: material.signed_hash_puk_client_sig.toString('base64url'),
      };
    },
    async answerChallenge(pending) {
      const blob = Buffer.from(String(pending.tpm_credential_blob), 'base64');
      const secret = Buffer.from(String(pending.tpm_encrypted_secret), 'base64');
      const answer = await helper.activateCredential(blob, secret);
      return { transaction_id: pending.transaction_id, verify_type: TPM_ACTIVATION, tpm_decrypted_secret: answer.toString('base64') };
    },
    async clientStatement(o) {
      const challenge = Buffer.from(attestationChallenge(o.clientKey.jkt, o.nonce), 'base64url');
      const attestation = await helper.getAttestation(challenge, [7, 23]);
      if (attestation.status !== 'ATTESTATION_STATUS_SUCCESS' && attestation.status !== 'ATTESTATION_STATUS_BASELINE_MISMATCH') {
        throw new Error(`attestation helper answered ${attestation.status}`);
      }
      material ??= await helper.getRegistrationMaterial(canonicalJwk(o.clientKey));
      return {
        sub: o.clientId,
        platform: platformOf(process.platform),
        posture_type: ATTESTATION_TYPE.tpm,
        posture: {
          ...product,
          os: os.type(),
          os_version: os.release(),
          arch: process.arch,
          tpm_attestation_key: material.ak_public.toString('base64'),
          tpm_quote: attestation.attestation_quote.toString('base64'),
          tpm_event_log: attestation.event_log.toString('base64'),
          tpm_ek_certificate_chain: [material.ek_certificate.toString('base64')],
        },
        attestation_timestamp: o.now,
      };
    },
  };
}
