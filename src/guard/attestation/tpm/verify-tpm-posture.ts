import crypto from 'node:crypto';
import { InvalidRequest } from '../../errors';
import { attestationChallenge } from '../../../common/attestation-challenge';
import type { AttestationContext, AttestationResult, ClientStatement, PostureVerifier } from '../index';
import { attestationResult, printableMembers, PRODUCT_MEMBERS, registrationFor, type ProductFields } from '../posture-result';
import type { TpmRegistration } from './register-tpm';
import { parseTpm2bPublic } from './tpm-public';
import { TpmStructureError } from './tpm-reader';
import { QuoteError, verifyQuote } from './verify-quote';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

const BINARY_MEMBERS = ['tpm_attestation_key', 'tpm_quote', 'tpm_event_log'] as const;

/**
 * `posture_type: "tpm"` (docs/requirements.md, Hardware attestation), one named step each: the client registered a TPM, the
 * posture names its AK and EK certificate, the quote is by that AK over the attestation challenge of
 * this nonce and the event log replays to it. The PCR values go to the policy
 * (`attestation_result.tpm`), which judges them against `tpm.pcr_baselines`.
 */
export const tpmPostureVerifier: PostureVerifier = {
  async verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult> {
    const registered = registrationFor<TpmRegistration>(actx, ATTESTATION_TYPE.tpm);
    const p = postureHasAllMembers(statement.posture);
    attestationKeyIsTheRegisteredAk(p.tpm_attestation_key, registered);
    ekCertificateIsTheRegisteredOne(statement.posture.tpm_ek_certificate_chain, registered);
    const ak = parseTpm2bPublic(Buffer.from(registered.ak_public, 'base64'), 'registered AK');
    const challenge = Buffer.from(attestationChallenge(actx.clientJkt, actx.nonce), 'base64url');
    let quote;
    try {
      quote = verifyQuote(ak, decode(p.tpm_quote, 'tpm_quote'), decode(p.tpm_event_log, 'tpm_event_log'), challenge);
    } catch (err) {
      if (err instanceof QuoteError || err instanceof TpmStructureError) throw new InvalidRequest(`client_statement.posture: ${err.message}`);
      throw err;
    }
    return attestationResult(statement, p, {
      postureType: ATTESTATION_TYPE.tpm,
      result: { tpm: { pcrs: quote.pcrs, quote_verified: true } },
      hardware: { attestationKeyJkt: registered.ak_jkt },
    });
  },
};

function postureHasAllMembers(posture: Record<string, unknown>): ProductFields & Record<(typeof BINARY_MEMBERS)[number], string> {
  printableMembers(posture, PRODUCT_MEMBERS);
  for (const m of BINARY_MEMBERS) {
    const v = posture[m];
    if (typeof v !== 'string' || v.length === 0) throw new InvalidRequest(`client_statement.posture.${m} must be a base64 string`);
  }
  return posture as ProductFields & Record<(typeof BINARY_MEMBERS)[number], string>;
}

function decode(v: string, what: string): Buffer {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(v) || v.length > 1_500_000) throw new InvalidRequest(`client_statement.posture.${what} must be base64`);
  return Buffer.from(v, 'base64');
}

function attestationKeyIsTheRegisteredAk(key: string, registered: TpmRegistration): void {
  const given = decode(key, 'tpm_attestation_key');
  const expected = Buffer.from(registered.ak_public, 'base64');
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
    throw new InvalidRequest('client_statement.posture.tpm_attestation_key is not the AK registered for this client');
  }
}

function ekCertificateIsTheRegisteredOne(chain: unknown, registered: TpmRegistration): void {
  // Optional in the posture (the registration proved the EK); when sent, its first entry must be it.
  if (chain === undefined) return;
  if (!Array.isArray(chain) || chain.length === 0 || !chain.every((c) => typeof c === 'string')) {
    throw new InvalidRequest('client_statement.posture.tpm_ek_certificate_chain must be an array of base64 certificates');
  }
  if (Buffer.from(chain[0] as string, 'base64').toString('base64') !== registered.ek_certificate) {
    throw new InvalidRequest('client_statement.posture.tpm_ek_certificate_chain[0] is not the EK certificate registered for this client');
  }
}
