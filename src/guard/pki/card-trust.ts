import crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import { ADMISSION_OID, parseAdmission } from '../../common/admission';
import { subjectNameFields } from './certificate-builder';
import { PathValidationError, validatePath } from './path-validation';

/** Institution identity read from a card certificate that chains to a trust anchor. */
export interface VerifiedCard {
  telematikId: string;
  professionOid: string;
  commonName: string;
  organizationName?: string;
  publicKey: crypto.KeyObject;
}

export class CardCertificateError extends Error {}

/** A card chain validated once: its path (for OCSP) and the window in which all of it is valid. */
export interface CardPath {
  card: VerifiedCard;
  /** DER: the card certificate and its issuer (the OCSP request names both). */
  leaf: Buffer;
  issuer: Buffer;
}

/**
 * Verifies the `x5c` chain of a subject token, one named step each: decode, RFC 5280 path
 * validation to an anchor by the path-validation library (signatures, CA flags, keyCertSign,
 * pathLen, validity at `now`, critical extensions), the card's own key usage, the admission
 * extension.
 */
export async function verifyCardChain(x5c: unknown, anchors: crypto.X509Certificate[], now: Date): Promise<CardPath> {
  const key = Array.isArray(x5c) && x5c.every((c) => typeof c === 'string') ? crypto.createHash('sha256').update(x5c.join('.')).digest('base64url') : undefined;
  const hit = key ? verifiedChains.get(key) : undefined;
  // Signatures and names of a chain never change: only validity depends on the time.
  if (hit && hit.anchors === anchors) {
    if (now < hit.notBefore || now > hit.notAfter) throw new CardCertificateError('a certificate of the chain is not valid at this time');
    return hit.result;
  }
  const chain = decodeX5c(x5c);
  let path: pkijs.Certificate[];
  try {
    ({ path } = await validatePath(chain[0].raw, chain.slice(1).map((c) => c.raw), anchors.map((a) => a.raw), now));
  } catch (err) {
    if (err instanceof PathValidationError) throw new CardCertificateError(`card certificate does not chain to a trusted card CA: ${err.message}`);
    throw err;
  }
  const leaf = chain[0];
  cardKeyMaySign(path[0]);
  const admission = readAdmission(path[0]);
  const subject = subjectNameFields(leaf.raw);
  for (const v of [admission.telematikId, admission.professionOid, subject.CN, subject.O]) {
    if (v !== undefined && (/[\u0000-\u001f\u007f]/.test(v) || v.length > 256)) throw new CardCertificateError('card certificate names hold control characters');
  }
  const result: CardPath = {
    card: {
      telematikId: admission.telematikId,
      professionOid: admission.professionOid,
      commonName: subject.CN ?? admission.telematikId,
      organizationName: subject.O,
      publicKey: leaf.publicKey,
    },
    leaf: leaf.raw,
    issuer: Buffer.from(path[1].toSchema().toBER(false)),
  };
  if (key) {
    if (verifiedChains.size >= 10_000) verifiedChains.clear();
    verifiedChains.set(key, {
      anchors,
      result,
      notBefore: new Date(Math.max(...path.map((c) => c.notBefore.value.getTime()))),
      notAfter: new Date(Math.min(...path.map((c) => c.notAfter.value.getTime()))),
    });
  }
  return result;
}

/** Chains verified before, by hash of their x5c, per anchor set. */
const verifiedChains = new Map<string, { anchors: crypto.X509Certificate[]; result: CardPath; notBefore: Date; notAfter: Date }>();

function decodeX5c(x5c: unknown): crypto.X509Certificate[] {
  if (!Array.isArray(x5c) || x5c.length === 0 || x5c.length > 5 || !x5c.every((c) => typeof c === 'string')) {
    throw new CardCertificateError('x5c must be an array of 1 to 5 base64 certificates');
  }
  try {
    return x5c.map((c: string) => new crypto.X509Certificate(Buffer.from(c, 'base64')));
  } catch {
    throw new CardCertificateError('x5c holds a certificate that does not parse');
  }
}

/** A card signs subject tokens: when it states a key usage, digitalSignature must be in it (RFC 5280 §4.2.1.3). */
function cardKeyMaySign(cert: pkijs.Certificate): void {
  const ku = cert.extensions?.find((e) => e.extnID === '2.5.29.15');
  if (!ku) return;
  const bits = (ku.parsedValue as { valueBlock: { valueHexView: Uint8Array } }).valueBlock.valueHexView;
  if (((bits[0] ?? 0) & 0x80) === 0) throw new CardCertificateError('the card certificate key usage does not allow digitalSignature');
}

function readAdmission(cert: pkijs.Certificate) {
  const ext = cert.extensions?.find((e) => e.extnID === ADMISSION_OID);
  const admission = ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
  if (!admission) throw new CardCertificateError('card certificate has no admission extension with Telematik-ID and professionOID');
  return admission;
}
