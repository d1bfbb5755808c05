import crypto from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { ADMISSION_OID, parseAdmission, type Admission } from '../../../common/admission';
import { institutionCardChecks } from '../card-checks';
import type { CardAlg, InstitutionCard } from '../institution-card';
import { readKonFile } from './kon-file';
import { KonnektorClient, type CardInfo } from './konnektor-client';
import { KonnektorError } from './soap';

/**
 * The practice's SMC-B behind its Konnektor: the certificate read once, every subject token signed
 * by the card (ExternalAuthenticate over the SHA-256 of the JWS signing input), so the key never
 * leaves it.
 */
export class KonnektorCard implements InstitutionCard {
  readonly admission: Admission | undefined;
  readonly alg: CardAlg;

  constructor(
    private readonly client: KonnektorClient,
    readonly info: CardInfo,
    readonly certificate: crypto.X509Certificate,
    readonly describe: string,
  ) {
    this.admission = admissionOf(certificate);
    const key = certificate.publicKey;
    this.alg = key.asymmetricKeyType === 'rsa' ? 'PS256' : key.asymmetricKeyDetails?.namedCurve === 'brainpoolP256r1' ? 'BP256R1' : 'ES256';
  }

  async signJwt(payload: Record<string, unknown>, headerOverrides: Record<string, unknown> = {}): Promise<string> {
    const header = { alg: this.alg, typ: 'JWT', x5c: [this.certificate.raw.toString('base64')], ...headerOverrides };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
    const digest = crypto.createHash('sha256').update(input).digest();
    const answered = await this.client.externalAuthenticate(this.info.handle, digest, this.alg === 'PS256' ? 'rsassa-pss' : 'ecdsa');
    const signature = this.alg === 'PS256' ? answered : derToJoseEcdsa(answered, 32);
    // The card's answer is checked against its certificate here: a wrong card or a mangled answer
    // shows as what it is, not as a refused token exchange later.
    const ok =
      this.alg === 'PS256'
        ? crypto.verify('sha256', Buffer.from(input), { key: this.certificate.publicKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }, signature)
        : crypto.verify('sha256', Buffer.from(input), { key: this.certificate.publicKey, dsaEncoding: 'ieee-p1363' }, signature);
    if (!ok) throw new KonnektorError('protocol', `the signature the Konnektor returned for card ${this.info.handle} does not verify with its C.AUT certificate`);
    return `${input}.${signature.toString('base64url')}`;
  }
}

/**
 * Opens the SMC-B a `.kon` file leads to: the Konnektor's services, its SMC-Bs (GetCards has no
 * Telematik-ID: each card's C.AUT is read to find it), the one the `telematikId` hint names or the
 * only one, its authentication certificate (ECC first, RSA when the card has no ECC key), and its
 * PIN.SMC verified.
 */
export async function openKonnektorCard(file: string, env: NodeJS.ProcessEnv = process.env): Promise<KonnektorCard> {
  const kon = readKonFile(file, env);
  const source = `the .kon file ${file}`;
  const client = await KonnektorClient.connect(kon, source);
  const context = `Mandant ${kon.mandantId}, client system ${kon.clientSystemId}, workplace ${kon.workplaceId}`;
  const cards = await client.getCards('SMC-B');
  if (cards.length === 0) throw new KonnektorError('refused', `the Konnektor at ${kon.url} sees no SMC-B for ${context}: is the card inserted and its terminal assigned to this workplace?`);
  const read = await Promise.all(cards.map(async (info) => ({ info, cert: await authCertificate(client, info) })));
  const described = (r: (typeof read)[number]) => `${r.info.handle} (Telematik-ID ${admissionOf(r.cert)?.telematikId ?? 'unknown'}${r.info.holder ? `, ${r.info.holder}` : ''}${r.info.iccsn ? `, ICCSN ${r.info.iccsn}` : ''})`;
  let chosen: (typeof read)[number] | undefined;
  if (kon.telematikId) {
    chosen = read.find((r) => admissionOf(r.cert)?.telematikId === kon.telematikId);
    if (!chosen) throw new KonnektorError('refused', `no SMC-B with Telematik-ID ${kon.telematikId} (telematikId of ${source}) at the Konnektor ${kon.url}; it sees: ${read.map(described).join('; ')}`);
  } else if (read.length > 1) {
    throw new KonnektorError('refused', `the Konnektor at ${kon.url} sees ${read.length} SMC-Bs for ${context}: name one with "telematikId" in ${source}: ${read.map(described).join('; ')}`);
  } else chosen = read[0];
  const pin = await client.pinStatus(chosen.info.handle, 'PIN.SMC');
  if (pin.status !== 'VERIFIED') {
    throw new KonnektorError('refused', `the SMC-B is not unlocked: card ${described(chosen)} has PIN.SMC ${pin.status}${pin.leftTries !== undefined ? ` (${pin.leftTries} tries left)` : ''}; unlock it with its PIN through the practice software or at the card terminal, then log in again`);
  }
  const card = new KonnektorCard(client, chosen.info, chosen.cert, `the SMC-B ${described(chosen)} at the Konnektor ${kon.url}`);
  return institutionCardChecks(card, `the C.AUT certificate of card ${chosen.info.handle}`, 'konnektor');
}

async function authCertificate(client: KonnektorClient, info: CardInfo): Promise<crypto.X509Certificate> {
  const cert = (await client.readAuthCertificate(info.handle, 'ECC')) ?? (await client.readAuthCertificate(info.handle, 'RSA'));
  if (!cert) throw new KonnektorError('protocol', `the Konnektor returned no C.AUT certificate for card ${info.handle}`);
  return cert;
}

function admissionOf(cert: crypto.X509Certificate): Admission | undefined {
  const ext = pkijs.Certificate.fromBER(new Uint8Array(cert.raw)).extensions?.find((e) => e.extnID === ADMISSION_OID);
  return ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
}

/**
 * An ECDSA signature as DER `SEQUENCE { r INTEGER, s INTEGER }` (what the Konnektor answers, as
 * zeta-sdk reads it) in the JWS form: r and s, each `size` bytes, big-endian (RFC 7518 §3.4).
 */
export function derToJoseEcdsa(der: Buffer, size: number): Buffer {
  const parsed = asn1js.fromBER(new Uint8Array(der));
  const seq = parsed.result as asn1js.Sequence;
  const ints = parsed.offset === der.length && seq instanceof asn1js.Sequence ? seq.valueBlock.value : [];
  if (ints.length !== 2 || !ints.every((v) => v instanceof asn1js.Integer)) throw new KonnektorError('protocol', 'the Konnektor answered an ECDSA signature that is not DER SEQUENCE { r, s }');
  const part = (v: asn1js.Integer) => {
    let bytes = Buffer.from(v.valueBlock.valueHexView);
    while (bytes.length > size && bytes[0] === 0) bytes = bytes.subarray(1);
    if (bytes.length > size) throw new KonnektorError('protocol', `the Konnektor answered an ECDSA signature value longer than ${size} bytes`);
    return Buffer.concat([Buffer.alloc(size - bytes.length), bytes]);
  };
  return Buffer.concat(ints.map((v) => part(v as asn1js.Integer)));
}

function b64url(s: string): string {
  return Buffer.from(s, 'utf8').toString('base64url');
}
