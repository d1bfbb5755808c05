import crypto from 'node:crypto';
import type { TpmTools } from '../../src/attestation-helper/tpm-tools';
import type { EcKey } from '../../src/client/crypto';
import { attestationChallenge } from '../../src/common/attestation-challenge';
import { canonicalEcJwk } from '../../src/common/canonical-jwk';
import { logEvent, specIdHeader } from '../../src/common/tpm-event-log';

export const EV_SEPARATOR = 0x00000004;
export const EV_EVENT_TAG = 0x00000006;
export const EV_EFI_VARIABLE_DRIVER_CONFIG = 0x80000001;

/** The canonical JWK (RFC 7638) of a client key: what the AK signs at registration. */
export function canonicalJwk(key: EcKey): Buffer {
  return canonicalEcJwk(key.publicJwk);
}

/**
 * The client side of TPM attestation in tests, on a real TPM through tpm2-tools: the registration
 * body, credential activation, measurements with their event log, and the posture of a token
 * exchange. swtpm has no firmware, so the test writes a small Secure Boot story into PCR 7.
 */
export class TestTpmClient {
  private log: Buffer[] = [specIdHeader()];

  constructor(readonly tools: TpmTools) {}

  async measure(pcr: number, data: Buffer, eventType = EV_EVENT_TAG): Promise<void> {
    const digest = crypto.createHash('sha256').update(data).digest();
    await this.tools.pcrExtend(pcr, digest);
    this.log.push(logEvent(pcr, eventType, digest, data));
  }

  async bootStory(): Promise<void> {
    await this.measure(7, Buffer.from('SecureBoot=1'), EV_EFI_VARIABLE_DRIVER_CONFIG);
    await this.measure(7, Buffer.alloc(4), EV_SEPARATOR);
    await this.measure(23, Buffer.from('terminus-client 0.1.0'));
  }

  eventLog(): Buffer {
    return Buffer.concat(this.log);
  }

  async registrationBody(clientKey: EcKey, o: { ekAsJwk?: boolean } = {}): Promise<Record<string, unknown>> {
    const ekPublic = await this.tools.ekPublic();
    const akPublic = await this.tools.ensureAk();
    const ekCert = await this.tools.ekCertificate();
    const signature = await this.tools.akSign(canonicalJwk(clientKey));
    return {
      attestation_type: 'tpm',
      client_name: 'tpm-client',
      token_endpoint_auth_method: 'private_key_jwt',
      grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange', 'refresh_token'],
      jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] },
      puk_ek_enc: o.ekAsJwk ? new crypto.X509Certificate(ekCert).publicKey.export({ format: 'jwk' }) : ekPublic.toString('base64'),
      c_ek_enc: ekCert.toString('base64'),
      puk_ak_sig: akPublic.toString('base64'),
      signed_hash_puk_client_sig: signature.toString('base64url'),
    };
  }

  /** The secret of a 202 answer, activated by the TPM (base64). */
  async activate(answer: { tpm_credential_blob: string; tpm_encrypted_secret: string }): Promise<string> {
    const secret = await this.tools.activateCredential(Buffer.from(answer.tpm_credential_blob, 'base64'), Buffer.from(answer.tpm_encrypted_secret, 'base64'));
    return secret.toString('base64');
  }

  /** The posture of a token exchange: a quote over PCR 7 and 23 with the attestation challenge. */
  async posture(clientJkt: string, nonce: string, o: { pcrs?: number[]; qualifyingData?: Buffer } = {}): Promise<Record<string, unknown>> {
    const challenge = o.qualifyingData ?? Buffer.from(attestationChallenge(clientJkt, nonce), 'base64url');
    const quote = await this.tools.quote(o.pcrs ?? [7, 23], challenge);
    return {
      product_id: 'terminus-client',
      product_version: '0.1.0',
      os: 'Linux',
      os_version: '6.1',
      arch: 'x64',
      tpm_attestation_key: (await this.tools.ensureAk()).toString('base64'),
      tpm_quote: quote.toString('base64'),
      tpm_event_log: this.eventLog().toString('base64'),
      tpm_ek_certificate_chain: [(await this.tools.ekCertificate()).toString('base64')],
    };
  }
}
