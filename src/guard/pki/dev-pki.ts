import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { dataDirInUse } from '../data-dir';
import { ADMISSION_OID, encodeAdmission } from '../../protocol/admission';
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

export function createDevPki(): DevPki {
  const ca = createCardCa();
  return { ca, cards: DEV_CARDS.map((spec) => issueCard(ca, spec)) };
}

const FILES = { caCert: 'card-ca.pem', caKey: 'card-ca.key.pem' };
const cardFile = (c: { curve: CardCurve }) => (c.curve === 'P-256' ? 'card-p256' : c.curve === 'brainpoolP256r1' ? 'card-brainpool' : 'card-rsa');

/** Writes the PKI as PEM files: card-ca.pem (the trust anchor), card-*.pem and card-*.key.pem (mode 600). */
export function writeDevPki(dir: string, pki: DevPki): string[] {
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

