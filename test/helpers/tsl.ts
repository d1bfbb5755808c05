import crypto from 'node:crypto';
import { XMLBuilder } from 'fast-xml-parser';
import { SignedXml } from 'xml-crypto';
import { buildCertificate, derToPem } from '../../src/guard/pki/certificate-builder';
import { LIST_SIGNATURE_ALGORITHMS } from '../../src/guard/pki/tsl/verify-list-signature';
import { CA_PKC } from '../../src/guard/pki/tsl/trust-status-list';

// Trust-service status lists as gematik publishes them (ETSI TS 119 612 XML, enveloped XAdES-BES
// signature with exclusive c14n and ecdsa-sha256 on brainpoolP256r1), built from objects and
// signed by xml-crypto in the test.

const DAY = 86_400_000;
export const SVC_STATUS = {
  inaccord: 'http://uri.etsi.org/TrstSvc/Svcstatus/inaccord',
  revoked: 'http://uri.etsi.org/TrstSvc/Svcstatus/revoked',
  withdrawn: 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/withdrawn',
};
export const OID_SMC_B_AUT = '1.2.276.0.76.4.77';

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface ListedCa {
  certPem: string;
  status?: string;
  type?: string;
  extensionOids?: string[];
  name?: string;
}

export interface TslSpec {
  sequence: number;
  issued?: Date;
  nextUpdate: Date;
  services: ListedCa[];
}

/** A TSL signer CA and a signer it issued (keyUsage nonRepudiation, EKU tslSigning), brainpool by default. */
export function createTslSigner(opts: { curve?: 'brainpoolP256r1' | 'P-256'; name?: string; notAfter?: Date; now?: Date } = {}): { ca: KeyPairPem; signer: KeyPairPem } {
  const now = opts.now ?? new Date();
  const namedCurve = opts.curve ?? 'brainpoolP256r1';
  const caPair = crypto.generateKeyPairSync('ec', { namedCurve });
  const caDer = buildCertificate({
    subject: { commonName: `${opts.name ?? 'Test'} TSL-CA`, organizationName: 'Terminus tests', countryName: 'DE' },
    subjectPublicKey: caPair.publicKey,
    issuerKey: caPair.privateKey,
    notBefore: new Date(now.getTime() - DAY),
    notAfter: new Date(now.getTime() + 3650 * DAY),
    ca: true,
  });
  const pair = crypto.generateKeyPairSync('ec', { namedCurve });
  const der = buildCertificate({
    subject: { commonName: `${opts.name ?? 'Test'} TSL Signing Unit`, organizationName: 'Terminus tests', countryName: 'DE' },
    issuerCert: caDer,
    subjectPublicKey: pair.publicKey,
    issuerKey: caPair.privateKey,
    notBefore: new Date(now.getTime() - DAY),
    notAfter: opts.notAfter ?? new Date(now.getTime() + 365 * DAY),
    ca: false,
    keyUsage: 0x40,
    extKeyUsage: ['0.4.0.2231.3.0'],
  });
  const pem = (k: crypto.KeyObject) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
  return { ca: { certPem: derToPem(caDer), keyPem: pem(caPair.privateKey) }, signer: { certPem: derToPem(der), keyPem: pem(pair.privateKey) } };
}

const TSL_NS = 'http://uri.etsi.org/02231/v2#';
const b64 = (pem: string) => new crypto.X509Certificate(pem).raw.toString('base64');

/** The unsigned list. */
export function buildTsl(spec: TslSpec): string {
  const issued = spec.issued ?? new Date();
  const service = (s: ListedCa) => ({
    ServiceInformation: {
      ServiceTypeIdentifier: s.type ?? CA_PKC,
      ServiceName: { Name: { '@_xml:lang': 'de', '#text': s.name ?? new crypto.X509Certificate(s.certPem).subject.replace(/\n/g, ',') } },
      ServiceDigitalIdentity: { DigitalId: { X509Certificate: b64(s.certPem) } },
      ServiceStatus: s.status ?? SVC_STATUS.inaccord,
      StatusStartingTime: new Date(issued.getTime() - 30 * DAY).toISOString(),
      ...(s.extensionOids ? { ServiceInformationExtensions: { Extension: s.extensionOids.map((oid) => ({ '@_Critical': 'false', ExtensionOID: oid, ExtensionValue: 'oid' })) } } : {}),
    },
  });
  const doc = {
    TrustServiceStatusList: {
      '@_xmlns': TSL_NS,
      '@_Id': `ID3${spec.sequence}${issued.toISOString().replace(/[-:T]|\.\d+/g, '')}`,
      '@_TSLTag': 'http://uri.etsi.org/02231/TSLTag',
      SchemeInformation: {
        TSLVersionIdentifier: 3,
        TSLSequenceNumber: spec.sequence,
        TSLType: 'http://uri.etsi.org/TrstSvc/TSLtype/generic',
        ListIssueDateTime: issued.toISOString(),
        NextUpdate: { dateTime: spec.nextUpdate.toISOString() },
      },
      TrustServiceProviderList: {
        TrustServiceProvider: {
          TSPInformation: { TSPName: { Name: { '@_xml:lang': 'de', '#text': 'Terminus tests' } } },
          TSPServices: { TSPService: spec.services.map(service) },
        },
      },
    },
  };
  return new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', format: true }).build(doc);
}

const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const SHA256 = 'http://www.w3.org/2001/04/xmlenc#sha256';

/** Signs a list as gematik does: enveloped, URI="" with exc-c14n, a XAdES SignedProperties reference naming the signer. */
export function signTsl(xml: string, signer: KeyPairPem, opts: { xades?: boolean; signerDigest?: string } = {}): string {
  const xades = opts.xades ?? true;
  const signerDigest = opts.signerDigest ?? crypto.createHash('sha256').update(new crypto.X509Certificate(signer.certPem).raw).digest('base64');
  const qualifying = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_' }).build({
    'xades:QualifyingProperties': {
      '@_xmlns:xades': 'http://uri.etsi.org/01903/v1.3.2#',
      '@_xmlns:ds': 'http://www.w3.org/2000/09/xmldsig#',
      '@_Target': '#tsl-signature',
      'xades:SignedProperties': {
        '@_Id': 'tsl-signed-properties',
        'xades:SignedSignatureProperties': {
          'xades:SigningTime': new Date().toISOString(),
          'xades:SigningCertificate': {
            'xades:Cert': { 'xades:CertDigest': { 'ds:DigestMethod': { '@_Algorithm': SHA256 }, 'ds:DigestValue': signerDigest } },
          },
        },
      },
    },
  });
  const sig = new SignedXml({
    privateKey: signer.keyPem,
    publicCert: signer.certPem,
    signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256',
    canonicalizationAlgorithm: EXC_C14N,
    objects: xades ? [{ content: qualifying }] : undefined,
  });
  sig.SignatureAlgorithms = LIST_SIGNATURE_ALGORITHMS;
  sig.addReference({ xpath: '/*', transforms: ['http://www.w3.org/2000/09/xmldsig#enveloped-signature', EXC_C14N], digestAlgorithm: SHA256, isEmptyUri: true });
  if (xades) sig.addReference({ xpath: "//*[@Id='tsl-signed-properties']", transforms: [EXC_C14N], digestAlgorithm: SHA256, type: 'http://uri.etsi.org/01903#SignedProperties' });
  sig.computeSignature(xml, { prefix: 'ds', attrs: { Id: 'tsl-signature' }, location: { reference: '/*', action: 'append' } });
  return sig.getSignedXml();
}
