import crypto from 'node:crypto';
import { SignedXml, type SignatureAlgorithm } from 'xml-crypto';
import { PathValidationError, extendedKeyUsages, validatePath } from '../path-validation';
import { NS, TrustListRejected, childrenNamed, descend, parseXmlStrictly, textOf, type XmlDocument, type XmlElement } from './xml-dom';

const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';
const SHA256 = 'http://www.w3.org/2001/04/xmlenc#sha256';
/** ETSI TS 119 612 §5.7.1: extended key usage of a trust-list signer (id-tsl-kp-tslSigning). */
const TSL_SIGNING_EKU = '0.4.0.2231.3.0';

/**
 * ECDSA for XML-DSig 1.1 (§6.4.3: the SignatureValue is r || s, not DER) on node:crypto, which
 * knows brainpoolP256r1, the curve gematik signs its TSL with; WebCrypto does not.
 */
class NodeEcdsa implements SignatureAlgorithm {
  constructor(
    readonly uri: string,
    readonly hash: string,
  ) {}
  getSignature(signedInfo: crypto.BinaryLike, privateKey: crypto.KeyLike): string {
    return crypto.sign(this.hash, Buffer.from(signedInfo as string), { key: privateKey instanceof crypto.KeyObject ? privateKey : crypto.createPrivateKey(privateKey as string | Buffer), dsaEncoding: 'ieee-p1363' }).toString('base64');
  }
  verifySignature(material: string, key: crypto.KeyLike, signatureValue: string): boolean {
    return crypto.verify(this.hash, Buffer.from(material, 'utf8'), { key: crypto.createPublicKey(key), dsaEncoding: 'ieee-p1363' }, Buffer.from(signatureValue, 'base64'));
  }
  getAlgorithmName() {
    return this.uri as ReturnType<SignatureAlgorithm['getAlgorithmName']>;
  }
}

const ecdsa = (uri: string, hash: string) =>
  class extends NodeEcdsa {
    constructor() {
      super(uri, hash);
    }
  };

/** Signature algorithms a list may use: ECDSA and RSA with SHA-2; SHA-1 and HMAC are refused. */
export const LIST_SIGNATURE_ALGORITHMS = {
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256': ecdsa('http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256', 'sha256'),
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384': ecdsa('http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384', 'sha384'),
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512': ecdsa('http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512', 'sha512'),
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256': new SignedXml().SignatureAlgorithms['http://www.w3.org/2001/04/xmldsig-more#rsa-sha256'],
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512': new SignedXml().SignatureAlgorithms['http://www.w3.org/2001/04/xmldsig-more#rsa-sha512'],
};

export interface VerifiedList {
  /** The list as signed: the canonical form of the whole document without its signature. */
  signedXml: string;
  signer: crypto.X509Certificate;
}

/**
 * Verifies an enveloped XML signature over a whole trust list, as ETSI TS 119 612 §5.7 and
 * gematik's TUC_PKI_001 ask, one named step each: one signature, child of the root; its signer
 * certificate chains to `signerCas` at `now` (validity included) and may sign lists; the XML
 * signature itself (references and signature value, by xml-crypto's canonicalisation with the
 * algorithms above); a reference covering the whole document; the XAdES signing-certificate digest
 * naming that signer. The caller reads the list from `signedXml` only, so nothing outside the
 * signature (comments, a second copy of an element) can change what is read.
 */
export async function verifyListSignature(xml: string, signerCas: crypto.X509Certificate[], now: Date, what: string): Promise<VerifiedList> {
  const doc = parseXmlStrictly(xml, what);
  const signature = theOneSignature(doc, what);
  const { signer, intermediates } = keyInfoCertificates(signature, what);
  await signerChainsToCa(signer, intermediates, signerCas, now, what);
  const sig = new SignedXml({ publicCert: signer.toString(), getCertFromKeyInfo: () => null });
  sig.SignatureAlgorithms = LIST_SIGNATURE_ALGORITHMS;
  sig.HashAlgorithms = { [SHA256]: new SignedXml().HashAlgorithms[SHA256], 'http://www.w3.org/2001/04/xmlenc#sha512': new SignedXml().HashAlgorithms['http://www.w3.org/2001/04/xmlenc#sha512'] };
  let valid: boolean;
  try {
    sig.loadSignature(signature);
    valid = sig.checkSignature(xml);
  } catch (err) {
    throw new TrustListRejected('signature', `the XML signature of ${what} cannot be checked: ${(err as Error).message}`);
  }
  if (!valid) throw new TrustListRejected('signature', `the XML signature of ${what} does not verify (a signed part was changed, or another key signed it)`);
  const refs = sig.getReferences();
  const whole = refs.find((r) => r.uri === '' && r.transforms.includes(ENVELOPED));
  if (!whole?.signedReference) throw new TrustListRejected('signature', `the signature of ${what} does not cover the whole document (no Reference URI="" with the enveloped-signature transform)`);
  // xml-crypto does not keep a Reference's Type: the XAdES one is the reference whose signed content is SignedProperties.
  for (const ref of refs) {
    if (ref.uri?.startsWith('#') && ref.signedReference && signedElementIs(ref.signedReference, NS.xades, 'SignedProperties')) signingCertificateIsSigner(ref.signedReference, signer, what);
  }
  return { signedXml: whole.signedReference, signer };
}

function theOneSignature(doc: XmlDocument, what: string): XmlElement {
  const all = doc.getElementsByTagNameNS(NS.ds, 'Signature');
  if (all.length !== 1) throw new TrustListRejected('signature', `${what} must hold exactly one ds:Signature, it holds ${all.length}`);
  const signature = all[0];
  if (signature.parentNode !== doc.documentElement) throw new TrustListRejected('signature', `the ds:Signature of ${what} must be a child of its root element`);
  return signature;
}

function keyInfoCertificates(signature: XmlElement, what: string): { signer: crypto.X509Certificate; intermediates: crypto.X509Certificate[] } {
  const data = descend(signature, NS.ds, 'KeyInfo', 'X509Data');
  const texts = data ? childrenNamed(data, NS.ds, 'X509Certificate').map(textOf) : [];
  if (texts.length === 0 || texts.some((t) => t === undefined)) throw new TrustListRejected('signer', `the signature of ${what} names no signer certificate (KeyInfo/X509Data/X509Certificate)`);
  let certs: crypto.X509Certificate[];
  try {
    certs = texts.map((t) => new crypto.X509Certificate(Buffer.from(t!.replace(/\s+/g, ''), 'base64')));
  } catch {
    throw new TrustListRejected('signer', `a signer certificate of ${what} does not parse`);
  }
  return { signer: certs[0], intermediates: certs.slice(1) };
}

async function signerChainsToCa(signer: crypto.X509Certificate, intermediates: crypto.X509Certificate[], cas: crypto.X509Certificate[], now: Date, what: string): Promise<void> {
  let leaf;
  try {
    ({ leaf } = await validatePath(signer.raw, intermediates.map((c) => c.raw), cas.map((c) => c.raw), now));
  } catch (err) {
    if (err instanceof PathValidationError) throw new TrustListRejected('signer', `the signer of ${what} (${signer.subject.replace(/\n/g, ', ')}) does not chain to the list signer CA: ${err.message}`);
    throw err;
  }
  const ekus = extendedKeyUsages(leaf);
  if (leaf.extensions?.some((e) => e.extnID === '2.5.29.37') && !ekus.includes(TSL_SIGNING_EKU)) {
    throw new TrustListRejected('signer', `the signer certificate of ${what} is not for trust lists (extended key usage without tslSigning ${TSL_SIGNING_EKU})`);
  }
}

function signedElementIs(canonicalXml: string, ns: string, name: string): boolean {
  const root = parseXmlStrictly(canonicalXml, 'a signed reference').documentElement;
  return root?.namespaceURI === ns && root.localName === name;
}

/** XAdES (ETSI EN 319 132-1 §5.2.2): the signed properties name the signer certificate by its SHA-256 digest. */
function signingCertificateIsSigner(signedProperties: string, signer: crypto.X509Certificate, what: string): void {
  const props = parseXmlStrictly(signedProperties, `the XAdES signed properties of ${what}`).documentElement!;
  const signed = descend(props, NS.xades, 'SignedSignatureProperties');
  const holder = signed ? (childrenNamed(signed, NS.xades, 'SigningCertificateV2')[0] ?? childrenNamed(signed, NS.xades, 'SigningCertificate')[0]) : undefined;
  const digests = holder
    ? childrenNamed(holder, NS.xades, 'Cert').map((cert) => {
        const digest = descend(cert, NS.xades, 'CertDigest');
        return { method: descend(digest, NS.ds, 'DigestMethod')?.getAttribute('Algorithm'), value: textOf(descend(digest, NS.ds, 'DigestValue')) };
      })
    : [];
  const own = crypto.createHash('sha256').update(signer.raw).digest('base64');
  if (!digests.some((d) => d.method === SHA256 && d.value === own)) {
    throw new TrustListRejected('signer', `the XAdES signing certificate of ${what} is not the certificate in KeyInfo (SHA-256 digest differs or is missing)`);
  }
}

