import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { dataDirInUse } from '../data-dir';
import { ADMISSION_OID, encodeAdmission } from '../../common/admission';
import { buildCertificate, derToPem } from './certificate-builder';

export type CardCurve = 'P-256' | 'brainpoolP256r1' | 'rsa';

/** An institution card (SMC-B) as the software connector of the client library uses it. */
export interface CardCredentials {
  certPem: string;
  /** PKCS#8 PEM */
  keyPem: string;
  curve: CardCurve;
  telematikId: string;
  professionOid: string;
}

export interface CardCa {
  certPem: string;
  keyPem: string;
}

export interface DevPki {
  ca: CardCa;
  cards: CardCredentials[];
  /** An OCSP responder certificate (id-kp-OCSPSigning, issued by the CA) when the cards name a responder. */
  ocspResponder?: CardCa;
  ocspUrl?: string;
}

export interface CardSpec {
  telematikId: string;
  /** Default 1.2.276.0.76.4.50 (Betriebsstätte Arzt). */
  professionOid?: string;
  commonName?: string;
  organizationName?: string;
  curve?: CardCurve;
  notBefore?: Date;
  notAfter?: Date;
  /** false: a card without the admission extension (negative tests). */
  admission?: boolean;
  /** OCSP responder named in the card's authorityInfoAccess. */
  ocspUrl?: string;
}

const DAY = 86_400_000;
const DEV_CARDS: CardSpec[] = [
  { telematikId: '1-2-DEV-PRAXIS-P256', commonName: 'Praxis Dr. Dev (P-256)', organizationName: 'Praxis Dr. Dev', curve: 'P-256' },
  { telematikId: '1-2-DEV-PRAXIS-BP256', commonName: 'Praxis Dr. Dev (brainpool)', organizationName: 'Praxis Dr. Dev', curve: 'brainpoolP256r1' },
];

/** A card CA (P-256, ecdsa-with-SHA256), valid for ten years from `now`. */
export function createCardCa(opts: { commonName?: string; now?: Date } = {}): CardCa {
  const now = opts.now ?? new Date();
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = { commonName: opts.commonName ?? 'Terminus Dev Card CA', organizationName: 'Terminus development PKI', countryName: 'DE' };
  const der = buildCertificate({
    subject: name,
    subjectPublicKey: publicKey,
    issuerKey: privateKey,
    notBefore: new Date(now.getTime() - DAY),
    notAfter: new Date(now.getTime() + 3650 * DAY),
    ca: true,
  });
  return { certPem: derToPem(der), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** Issues an institution card certificate with the admission extension (Telematik-ID, professionOID). */
export function issueCard(ca: CardCa, spec: CardSpec): CardCredentials {
  const curve = spec.curve ?? 'P-256';
  const pair =
    curve === 'rsa'
      ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })
      : crypto.generateKeyPairSync('ec', { namedCurve: curve });
  const professionOid = spec.professionOid ?? '1.2.276.0.76.4.50';
  const caCert = new crypto.X509Certificate(ca.certPem);
  const now = new Date();
  const der = buildCertificate({
    subject: { commonName: spec.commonName ?? `Institution ${spec.telematikId}`, organizationName: spec.organizationName, countryName: 'DE' },
    issuerCert: caCert.raw,
    subjectPublicKey: pair.publicKey,
    issuerKey: crypto.createPrivateKey(ca.keyPem),
    notBefore: spec.notBefore ?? new Date(now.getTime() - DAY),
    notAfter: spec.notAfter ?? new Date(now.getTime() + 5 * 365 * DAY),
    ca: false,
    ocspUrl: spec.ocspUrl,
    extensions: spec.admission === false ? [] : [{ oid: ADMISSION_OID, der: encodeAdmission({ telematikId: spec.telematikId, professionOid }) }],
  });
  return {
    certPem: derToPem(der),
    keyPem: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    curve,
    telematikId: spec.telematikId,
    professionOid,
  };
}

/** A delegated OCSP responder (RFC 6960 §4.2.2.2): id-kp-OCSPSigning, issued by the card CA. */
export function issueOcspResponder(ca: CardCa): CardCa {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const now = new Date();
  const der = buildCertificate({
    subject: { commonName: 'Terminus Dev OCSP Responder', organizationName: 'Terminus development PKI', countryName: 'DE' },
    issuerCert: new crypto.X509Certificate(ca.certPem).raw,
    subjectPublicKey: publicKey,
    issuerKey: crypto.createPrivateKey(ca.keyPem),
    notBefore: new Date(now.getTime() - DAY),
    notAfter: new Date(now.getTime() + 2 * 365 * DAY),
    ca: false,
    extKeyUsage: ['1.3.6.1.5.5.7.3.9'],
  });
  return { certPem: derToPem(der), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

export function createDevPki(o: { ocspUrl?: string } = {}): DevPki {
  const ca = createCardCa();
  const cards = DEV_CARDS.map((spec) => issueCard(ca, { ...spec, ocspUrl: o.ocspUrl }));
  return o.ocspUrl ? { ca, cards, ocspResponder: issueOcspResponder(ca), ocspUrl: o.ocspUrl } : { ca, cards };
}

/** A line of `openssl ocsp -index` (the `openssl ca` database): V (valid) or R (revoked) per card. */
export function ocspIndexLine(certPem: string, revokedAt?: Date): string {
  const cert = new crypto.X509Certificate(certPem);
  const t = (d: Date) => d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z';
  const subject = '/' + cert.subject.split('\n').join('/');
  return [revokedAt ? 'R' : 'V', t(new Date(cert.validTo)), revokedAt ? t(revokedAt) : '', cert.serialNumber, 'unknown', subject].join('\t');
}

/** Thrown by writeDevPki when DIR holds a CA already and `force` is not set. */
export class DevPkiExists extends Error {}

const FILES = { caCert: 'card-ca.pem', caKey: 'card-ca.key.pem' };
const cardFile = (c: { curve: CardCurve }) => (c.curve === 'P-256' ? 'card-p256' : c.curve === 'brainpoolP256r1' ? 'card-brainpool' : 'card-rsa');

/**
 * Writes the PKI as PEM files: card-ca.pem (the trust anchor), card-*.pem and card-*.key.pem (mode
 * 600); with a responder also ocsp-responder.pem, its key and ocsp-index.txt for `openssl ocsp`. An
 * existing CA is never overwritten unless `force` says so (its cards would stop being trusted).
 */
export function writeDevPki(dir: string, pki: DevPki, o: { force?: boolean } = {}): string[] {
  if (!o.force && fs.existsSync(path.join(dir, FILES.caCert))) throw new DevPkiExists(`${path.join(dir, FILES.caCert)} exists: pass --force to replace the CA`);
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  const put = (name: string, content: string, mode = 0o644) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, content, { mode });
    written.push(p);
  };
  put(FILES.caCert, pki.ca.certPem);
  put(FILES.caKey, pki.ca.keyPem, 0o600);
  for (const card of pki.cards) {
    put(`${cardFile(card)}.pem`, card.certPem);
    put(`${cardFile(card)}.key.pem`, card.keyPem, 0o600);
  }
  if (pki.ocspResponder) {
    put('ocsp-responder.pem', pki.ocspResponder.certPem);
    put('ocsp-responder.key.pem', pki.ocspResponder.keyPem, 0o600);
    put('ocsp-index.txt', pki.cards.map((c) => `${ocspIndexLine(c.certPem)}\n`).join(''));
  }
  put(
    'cards.json',
    `${JSON.stringify(
      pki.cards.map((c) => ({ cert: `${cardFile(c)}.pem`, key: `${cardFile(c)}.key.pem`, curve: c.curve, telematikId: c.telematikId, professionOid: c.professionOid })),
      null,
      2,
    )}\n`,
  );
  return written;
}

function readDevPki(dir: string): DevPki | undefined {
  const list = path.join(dir, 'cards.json');
  if (!fs.existsSync(list) || !fs.existsSync(path.join(dir, FILES.caKey))) return undefined;
  const entries = JSON.parse(fs.readFileSync(list, 'utf8')) as { cert: string; key: string; curve: CardCurve; telematikId: string; professionOid: string }[];
  return {
    ca: { certPem: fs.readFileSync(path.join(dir, FILES.caCert), 'utf8'), keyPem: fs.readFileSync(path.join(dir, FILES.caKey), 'utf8') },
    cards: entries.map((e) => ({
      certPem: fs.readFileSync(path.join(dir, e.cert), 'utf8'),
      keyPem: fs.readFileSync(path.join(dir, e.key), 'utf8'),
      curve: e.curve,
      telematikId: e.telematikId,
      professionOid: e.professionOid,
    })),
  };
}

let inMemory: DevPki | undefined;

/**
 * The development PKI the server trusts when CARD_TRUST_ANCHORS is unset: kept in DATA_DIR/dev-pki
 * when the embedded store is on disk, else one per process (tests issue their cards from it).
 */
export function devPkiFor(ctx: AppContext): DevPki {
  if (dataDirInUse(ctx)) {
    const dir = path.join(ctx.config.dataDir, 'dev-pki');
    const existing = readDevPki(dir);
    if (existing) return existing;
    const pki = createDevPki();
    writeDevPki(dir, pki);
    return pki;
  }
  inMemory ??= createDevPki();
  return inMemory;
}

