import crypto from 'node:crypto';
import { MalformedEventLog, parseEventLog, replaySha256 } from '../../../common/tpm-event-log';
import { parseQuote, type QuoteAttest, type TpmSignature } from './parse-attest';
import { hashOf, TPM_ALG, TPM_CURVES } from './tpm-algorithms';
import { tpmPublicKey, type TpmPublic } from './tpm-public';

/** The PCRs every TPM posture quotes (sha256 bank): Secure Boot state and the client's own measurements. */
export const QUOTED_PCRS = [7, 23] as const;

export class QuoteError extends Error {}

export interface VerifiedQuote {
  /** Replayed PCR values, index → lowercase hex. */
  pcrs: Record<string, string>;
  resetCount: number;
  restartCount: number;
}

/**
 * A TPM posture's quote, one named step each: structure (no trailing bytes), signature by the
 * registered AK with its own scheme, magic and type, qualifying data = the attestation challenge,
 * PCR selection exactly sha256 {7, 23}, event log replayed to the quote's pcrDigest.
 */
export function verifyQuote(ak: TpmPublic, quote: Buffer, eventLog: Buffer, challenge: Buffer): VerifiedQuote {
  const { attest, signature } = parseQuote(quote);
  signatureIsByTheAk(ak, attest, signature);
  qualifyingDataIsTheChallenge(attest, challenge);
  selectionIsExactlyTheQuotedPcrs(attest);
  let pcrs: Map<number, Buffer>;
  try {
    pcrs = replaySha256(parseEventLog(eventLog).events, [...QUOTED_PCRS]);
  } catch (err) {
    if (err instanceof MalformedEventLog) throw new QuoteError(err.message);
    throw err;
  }
  replayedPcrsGiveTheDigest(ak, attest, pcrs);
  return {
    pcrs: Object.fromEntries([...pcrs].map(([i, v]) => [String(i), v.toString('hex')])),
    resetCount: attest.resetCount,
    restartCount: attest.restartCount,
  };
}

function signatureIsByTheAk(ak: TpmPublic, attest: QuoteAttest, sig: TpmSignature): void {
  // The AK's own scheme is pinned: no trying other paddings (tpm2_checkquote's leniency).
  if (sig.sigAlg !== ak.scheme.alg || sig.hashAlg !== ak.scheme.hashAlg) throw new QuoteError('tpm_quote is not signed with the scheme of the registered AK');
  const hash = hashOf(sig.hashAlg, 'quote signature').name;
  const key = tpmPublicKey(ak);
  let ok = false;
  if (sig.ecdsa) {
    const size = TPM_CURVES.get(ak.ecc!.curveId)!.size;
    if (sig.ecdsa.r.length > size || sig.ecdsa.s.length > size) throw new QuoteError('tpm_quote signature values are too long');
    const pad = (b: Buffer) => Buffer.concat([Buffer.alloc(size - b.length), b]);
    ok = crypto.verify(hash, attest.raw, { key, dsaEncoding: 'ieee-p1363' }, Buffer.concat([pad(sig.ecdsa.r), pad(sig.ecdsa.s)]));
  } else {
    const padding = sig.sigAlg === TPM_ALG.RSAPSS ? crypto.constants.RSA_PKCS1_PSS_PADDING : crypto.constants.RSA_PKCS1_PADDING;
    try {
      ok = crypto.verify(hash, attest.raw, { key, padding, saltLength: crypto.constants.RSA_PSS_SALTLEN_AUTO }, sig.rsa!);
    } catch {
      ok = false; // a signature of the wrong length
    }
  }
  if (!ok) throw new QuoteError('tpm_quote signature does not verify with the registered AK');
}

function qualifyingDataIsTheChallenge(attest: QuoteAttest, challenge: Buffer): void {
  if (attest.extraData.length !== challenge.length || !crypto.timingSafeEqual(attest.extraData, challenge)) {
    throw new QuoteError('tpm_quote qualifying data is not the attestation challenge of this nonce');
  }
}

function selectionIsExactlyTheQuotedPcrs(attest: QuoteAttest): void {
  // An inactive bank yields a validly signed quote over nothing: the selection must be exactly ours.
  const banks = attest.selection.filter((s) => s.pcrs.length > 0);
  const ok = banks.length === 1 && banks[0].hashAlg === TPM_ALG.SHA256 && banks[0].pcrs.join(',') === QUOTED_PCRS.join(',');
  if (!ok) throw new QuoteError(`tpm_quote must select exactly the sha256 PCRs ${QUOTED_PCRS.join(', ')}`);
}

function replayedPcrsGiveTheDigest(ak: TpmPublic, attest: QuoteAttest, pcrs: Map<number, Buffer>): void {
  // pcrDigest hashes the selected values in ascending order with the signing scheme's hash.
  const h = crypto.createHash(hashOf(ak.scheme.hashAlg, 'AK scheme').name);
  for (const i of QUOTED_PCRS) h.update(pcrs.get(i)!);
  const digest = h.digest();
  if (digest.length !== attest.pcrDigest.length || !crypto.timingSafeEqual(digest, attest.pcrDigest)) {
    throw new QuoteError('tpm_event_log does not replay to the quoted PCR digest');
  }
}

