import crypto from 'node:crypto';
import { certificatePublicKey, extendedKeyUsages, PathValidationError, validatePath } from './path-validation';

/** tcg-kp-EKCertificate (TCG EK Credential Profile §3.2.15). */
export const EK_CERTIFICATE_EKU = '2.23.133.8.1';

/** Why an EK certificate is refused: the stable token (docs/requirements.md#hardware-attestation) and the reason. */
export class EkCertificateError extends Error {
  constructor(
    readonly token: 'ek_chain_untrusted' | 'ek_cert_mismatch',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The EK certificate, one named step each: RFC 5280 path to a configured manufacturer CA (by the
 * path-validation library), the EK certificate purpose, and its key is the EK the client named.
 */
export async function verifyEkCertificate(ekCert: Buffer, intermediates: Buffer[], anchors: Buffer[], at: Date, ek: crypto.KeyObject): Promise<void> {
  let leaf;
  try {
    ({ leaf } = await validatePath(ekCert, intermediates, anchors, at));
  } catch (err) {
    if (err instanceof PathValidationError) throw new EkCertificateError('ek_chain_untrusted', `c_ek_enc: ${err.message}`);
    throw err;
  }
  if (!extendedKeyUsages(leaf).includes(EK_CERTIFICATE_EKU)) throw new EkCertificateError('ek_chain_untrusted', `c_ek_enc lacks the EK certificate purpose ${EK_CERTIFICATE_EKU}`);
  if (!certificatePublicKey(leaf).equals(ek)) throw new EkCertificateError('ek_cert_mismatch', 'the key of c_ek_enc is not puk_ek_enc');
}
