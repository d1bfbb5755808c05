import crypto from 'node:crypto';
import fs from 'node:fs';
import * as pkijs from 'pkijs';
import type { AppContext } from '../../context';
import { ADMISSION_OID, parseAdmission } from '../../protocol/admission';
import { pemCertificates, subjectNameFields } from './certificate-builder';
import { devPkiFor } from './dev-pki';

/** Institution identity read from a card certificate that chains to a trust anchor. */
export interface VerifiedCard {
  telematikId: string;
  professionOid: string;
  commonName: string;
  organizationName?: string;
  publicKey: crypto.KeyObject;
}

export class CardCertificateError extends Error {}

/** CARD_TRUST_ANCHORS, or the generated dev PKI CA with a warning. */
export function loadCardTrustAnchors(ctx: AppContext): crypto.X509Certificate[] {
  if (ctx.config.cardTrustAnchors) {
    const anchors = pemCertificates(fs.readFileSync(ctx.config.cardTrustAnchors, 'utf8')).map((der) => new crypto.X509Certificate(der));
    if (anchors.length === 0) throw new Error(`CARD_TRUST_ANCHORS: no certificate in ${ctx.config.cardTrustAnchors}`);
    return anchors;
  }
  ctx.logger.warn('CARD_TRUST_ANCHORS is unset: trusting the generated development card CA (never do this in production)');
  return [new crypto.X509Certificate(devPkiFor(ctx).ca.certPem)];
}

/**
 * Verifies the `x5c` chain of a subject token, one named step each: decode, build the path to an
 * anchor (signatures and CA flags), validity of every certificate at `now`, admission extension.
 */
export function verifyCardChain(x5c: unknown, anchors: crypto.X509Certificate[], now: Date): VerifiedCard {
  const key = Array.isArray(x5c) && x5c.every((c) => typeof c === 'string') ? crypto.createHash('sha256').update(x5c.join('.')).digest('base64url') : undefined;
  const hit = key ? verifiedChains.get(key) : undefined;
  // Signatures and names of a chain never change: only validity depends on the time.
  if (hit && hit.anchors === anchors) {
    if (now < hit.notBefore || now > hit.notAfter) throw new CardCertificateError('a certificate of the chain is not valid at this time');
    return hit.card;
  }
  const chain = decodeX5c(x5c);
  const path = buildPathToAnchor(chain, anchors);
  for (const cert of path) checkValidity(cert, now);
  const leaf = chain[0];
  const admission = readAdmission(leaf);
  const subject = subjectNameFields(leaf.raw);
  for (const v of [admission.telematikId, admission.professionOid, subject.CN, subject.O]) {
    if (v !== undefined && (/[\u0000-\u001f\u007f]/.test(v) || v.length > 256)) throw new CardCertificateError('card certificate names hold control characters');
  }
  const card: VerifiedCard = {
    telematikId: admission.telematikId,
    professionOid: admission.professionOid,
    commonName: subject.CN ?? admission.telematikId,
    organizationName: subject.O,
    publicKey: leaf.publicKey,
  };
  if (key) {
    if (verifiedChains.size >= 10_000) verifiedChains.clear();
    verifiedChains.set(key, {
      anchors,
      card,
      notBefore: new Date(Math.max(...path.map((c) => new Date(c.validFrom).getTime()))),
      notAfter: new Date(Math.min(...path.map((c) => new Date(c.validTo).getTime()))),
    });
  }
  return card;
}

/** Chains verified before, by hash of their x5c, per anchor set. */
const verifiedChains = new Map<string, { anchors: crypto.X509Certificate[]; card: VerifiedCard; notBefore: Date; notAfter: Date }>();

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

function buildPathToAnchor(chain: crypto.X509Certificate[], anchors: crypto.X509Certificate[]): crypto.X509Certificate[] {
  const path = [chain[0]];
  let current = chain[0];
  for (let depth = 0; depth < 5; depth++) {
    const anchor = anchors.find((a) => current.checkIssued(a) && current.verify(a.publicKey));
    if (anchor) return [...path, anchor];
    const next = chain.slice(1).find((c) => c.ca && current.checkIssued(c) && current.verify(c.publicKey) && !path.includes(c));
    if (!next) break;
    path.push(next);
    current = next;
  }
  throw new CardCertificateError('card certificate does not chain to a trusted card CA');
}

function checkValidity(cert: crypto.X509Certificate, now: Date): void {
  if (now < new Date(cert.validFrom) || now > new Date(cert.validTo)) {
    throw new CardCertificateError('a certificate of the chain is not valid at this time');
  }
}

function readAdmission(cert: crypto.X509Certificate) {
  const parsed = pkijs.Certificate.fromBER(new Uint8Array(cert.raw));
  const ext = parsed.extensions?.find((e) => e.extnID === ADMISSION_OID);
  const admission = ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
  if (!admission) throw new CardCertificateError('card certificate has no admission extension with Telematik-ID and professionOID');
  return admission;
}
