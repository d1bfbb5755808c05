import crypto from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';

export interface NameSpec {
  commonName: string;
  organizationName?: string;
  countryName?: string;
}

export interface CertificateSpec {
  subject: NameSpec;
  /** The issuing CA certificate (DER); absent: self-signed with `subject` as issuer. */
  issuerCert?: Buffer;
  /** DER SubjectPublicKeyInfo of the certified key (any curve Node knows, brainpool included). */
  subjectPublicKey: crypto.KeyObject;
  /** Issuer's private key; EC keys sign ecdsa-with-SHA256. Node's crypto signs brainpool too, WebCrypto would not. */
  issuerKey: crypto.KeyObject;
  notBefore: Date;
  notAfter: Date;
  ca?: boolean;
  /** Key usage bits, first byte of the BIT STRING (RFC 5280 §4.2.1.3); default keyCertSign|cRLSign for a CA, digitalSignature otherwise. */
  keyUsage?: number;
  /** Extended key usages (OIDs). */
  extKeyUsage?: string[];
  /** OCSP responder URL written into authorityInfoAccess. */
  ocspUrl?: string;
  extensions?: { oid: string; critical?: boolean; der: ArrayBuffer }[];
}

const ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';
const SHA256_WITH_RSA = '1.2.840.113549.1.1.11';

/** Builds and signs an X.509 v3 certificate with pkijs for the structure and node:crypto for the signature. */
export function buildCertificate(spec: CertificateSpec): Buffer {
  const cert = new pkijs.Certificate();
  cert.version = 2;
  cert.serialNumber = new asn1js.Integer({ valueHex: Uint8Array.from([0x01, ...crypto.randomBytes(15)]).buffer });
  cert.subject = rdn(spec.subject);
  // Copy the CA's encoded subject so name chaining compares equal byte for byte.
  cert.issuer = spec.issuerCert ? pkijs.Certificate.fromBER(new Uint8Array(spec.issuerCert)).subject : rdn(spec.subject);
  cert.notBefore = certificateTime(spec.notBefore);
  cert.notAfter = certificateTime(spec.notAfter);
  cert.subjectPublicKeyInfo = pkijs.PublicKeyInfo.fromBER(toArrayBuffer(spec.subjectPublicKey.export({ type: 'spki', format: 'der' })));
  const extensions: pkijs.Extension[] = [];
  if (spec.ca !== undefined) {
    extensions.push(new pkijs.Extension({ extnID: '2.5.29.19', critical: true, extnValue: new pkijs.BasicConstraints({ cA: spec.ca }).toSchema().toBER(false) }));
  }
  const keyUsage = spec.keyUsage ?? (spec.ca ? 0x06 : 0x80);
  extensions.push(
    new pkijs.Extension({
      extnID: '2.5.29.15',
      critical: true,
      // keyCertSign|cRLSign for a CA, digitalSignature for a card
      extnValue: new asn1js.BitString({ valueHex: Uint8Array.from([keyUsage]).buffer, unusedBits: unusedBits(keyUsage) }).toBER(false),
    }),
  );
  // Key identifiers (RFC 5280 §4.2.1.1-2): SHA-1 of the subjectPublicKey bits, the issuer's for the authority.
  const ski = keyIdentifier(cert.subjectPublicKeyInfo);
  extensions.push(new pkijs.Extension({ extnID: '2.5.29.14', critical: false, extnValue: new asn1js.OctetString({ valueHex: ski }).toBER(false) }));
  const aki = spec.issuerCert ? keyIdentifier(pkijs.Certificate.fromBER(new Uint8Array(spec.issuerCert)).subjectPublicKeyInfo) : ski;
  extensions.push(
    new pkijs.Extension({
      extnID: '2.5.29.35',
      critical: false,
      extnValue: new pkijs.AuthorityKeyIdentifier({ keyIdentifier: new asn1js.OctetString({ valueHex: aki }) }).toSchema().toBER(false),
    }),
  );
  if (spec.extKeyUsage) {
    extensions.push(new pkijs.Extension({ extnID: '2.5.29.37', critical: false, extnValue: new pkijs.ExtKeyUsage({ keyPurposes: spec.extKeyUsage }).toSchema().toBER(false) }));
  }
  if (spec.ocspUrl) {
    const aia = new pkijs.InfoAccess({
      accessDescriptions: [new pkijs.AccessDescription({ accessMethod: '1.3.6.1.5.5.7.48.1', accessLocation: new pkijs.GeneralName({ type: 6, value: spec.ocspUrl }) })],
    });
    extensions.push(new pkijs.Extension({ extnID: '1.3.6.1.5.5.7.1.1', critical: false, extnValue: aia.toSchema().toBER(false) }));
  }
  for (const e of spec.extensions ?? []) extensions.push(new pkijs.Extension({ extnID: e.oid, critical: e.critical ?? false, extnValue: e.der }));
  cert.extensions = extensions;
  const sigAlg = spec.issuerKey.asymmetricKeyType === 'rsa' ? SHA256_WITH_RSA : ECDSA_WITH_SHA256;
  cert.signature = new pkijs.AlgorithmIdentifier({ algorithmId: sigAlg, ...(sigAlg === SHA256_WITH_RSA ? { algorithmParams: new asn1js.Null() } : {}) });
  cert.signatureAlgorithm = new pkijs.AlgorithmIdentifier({ algorithmId: sigAlg, ...(sigAlg === SHA256_WITH_RSA ? { algorithmParams: new asn1js.Null() } : {}) });
  const tbs = cert.encodeTBS().toBER(false);
  cert.tbsView = new Uint8Array(tbs);
  const signature = crypto.sign('sha256', Buffer.from(tbs), spec.issuerKey);
  cert.signatureValue = new asn1js.BitString({ valueHex: toArrayBuffer(signature) });
  return Buffer.from(cert.toSchema().toBER(false));
}

/** RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime after; whole seconds, no fractions. */
function certificateTime(d: Date): pkijs.Time {
  const whole = new Date(Math.floor(d.getTime() / 1000) * 1000);
  return new pkijs.Time({ type: whole.getUTCFullYear() < 2050 ? 0 : 1, value: whole });
}

function unusedBits(byte: number): number {
  let n = 0;
  while (n < 7 && (byte & (1 << n)) === 0) n++;
  return n;
}

function keyIdentifier(spki: pkijs.PublicKeyInfo): ArrayBuffer {
  return toArrayBuffer(crypto.createHash('sha1').update(spki.subjectPublicKey.valueBlock.valueHexView).digest());
}

export function derToPem(der: Buffer, label = 'CERTIFICATE'): string {
  const b64 = der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** Splits a PEM bundle into DER certificates. */
export function pemCertificates(pem: string): Buffer[] {
  const out: Buffer[] = [];
  const re = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g;
  for (let m = re.exec(pem); m; m = re.exec(pem)) out.push(Buffer.from(m[1].replace(/\s+/g, ''), 'base64'));
  return out;
}

const NAME_OIDS: Record<string, string> = { '2.5.4.3': 'CN', '2.5.4.10': 'O', '2.5.4.6': 'C', '2.5.4.11': 'OU', '2.5.4.5': 'serialNumber' };

/** Subject attributes of a DER certificate as `{CN, O, C, ...}` (Node's subject string is ambiguous with multi-valued RDNs). */
export function subjectNameFields(der: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  for (const tv of pkijs.Certificate.fromBER(new Uint8Array(der)).subject.typesAndValues) {
    const name = NAME_OIDS[tv.type];
    const v = (tv.value as { valueBlock?: { value?: unknown } }).valueBlock?.value;
    if (name && typeof v === 'string' && !(name in out)) out[name] = v;
  }
  return out;
}

function rdn(name: NameSpec): pkijs.RelativeDistinguishedNames {
  const n = new pkijs.RelativeDistinguishedNames();
  if (name.countryName) n.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: '2.5.4.6', value: new asn1js.PrintableString({ value: name.countryName }) }));
  if (name.organizationName) n.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: '2.5.4.10', value: new asn1js.Utf8String({ value: name.organizationName }) }));
  n.typesAndValues.push(new pkijs.AttributeTypeAndValue({ type: '2.5.4.3', value: new asn1js.Utf8String({ value: name.commonName }) }));
  // One attribute per RDN (C=DE, O=…, CN=…), as CAs write names; pkijs alone would make one multi-valued RDN.
  const der = new asn1js.Sequence({ value: n.typesAndValues.map((tv) => new asn1js.Set({ value: [tv.toSchema()] })) }).toBER(false);
  return pkijs.RelativeDistinguishedNames.fromBER(der);
}

function toArrayBuffer(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}
