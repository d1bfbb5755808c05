import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCardCa } from '../../src/guard/pki/dev-pki';
import { cardIssuers, readTrustStatusList } from '../../src/guard/pki/tsl/trust-status-list';
import { verifyListSignature } from '../../src/guard/pki/tsl/verify-list-signature';
import { TrustListRejected } from '../../src/guard/pki/tsl/xml-dom';
import { buildTsl, createTslSigner, OID_SMC_B_AUT, signTsl, SVC_STATUS, type TslSpec } from '../helpers/tsl';

const DAY = 86_400_000;
const x509 = (pem: string) => new crypto.X509Certificate(pem);
const { ca, signer } = createTslSigner();
const cardCa = createCardCa({ commonName: 'SMC-B CA 1' });
const spec = (o: Partial<TslSpec> = {}): TslSpec => ({ sequence: 10, nextUpdate: new Date(Date.now() + 30 * DAY), services: [{ certPem: cardCa.certPem, extensionOids: [OID_SMC_B_AUT] }], ...o });

async function rejection(xml: string, cas = [x509(ca.certPem)], now = new Date()): Promise<TrustListRejected> {
  try {
    await verifyListSignature(xml, cas, now, 'the test TSL');
  } catch (err) {
    if (err instanceof TrustListRejected) return err;
    throw err;
  }
  throw new Error('the list was accepted');
}

describe('the signature of a trust list', () => {
  test('a brainpoolP256r1 XAdES-signed list verifies, and its signed content is what is read', async () => {
    const xml = signTsl(buildTsl(spec()), signer);
    const { signedXml, signer: who } = await verifyListSignature(xml, [x509(ca.certPem)], new Date(), 'the test TSL');
    expect(who.subject).toContain('TSL Signing Unit');
    expect(who.publicKey.asymmetricKeyDetails?.namedCurve).toBe('brainpoolP256r1');
    const list = readTrustStatusList(signedXml, 'the test TSL');
    expect(list.sequenceNumber).toBe(10n);
    expect(cardIssuers(list, new Date()).map((c) => c.fingerprint256)).toEqual([x509(cardCa.certPem).fingerprint256]);
  });

  test('xmlsec1, another XML-DSig implementation, verifies the same list and refuses it changed', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tsl-'));
    const xmlsec = (xml: string) => {
      fs.writeFileSync(path.join(dir, 'tsl.xml'), xml);
      return spawnSync('xmlsec1', ['--verify', '--trusted-pem', path.join(dir, 'ca.pem'), '--id-attr:Id', 'http://uri.etsi.org/01903/v1.3.2#:SignedProperties', path.join(dir, 'tsl.xml')], { encoding: 'utf8' });
    };
    try {
      fs.writeFileSync(path.join(dir, 'ca.pem'), ca.certPem);
      const signed = signTsl(buildTsl(spec()), signer);
      const good = xmlsec(signed);
      expect([good.status, good.stderr]).toEqual([0, expect.stringContaining('SignedInfo References (ok/all): 2/2')]);
      expect(xmlsec(signed.replace('<TSLSequenceNumber>10<', '<TSLSequenceNumber>11<')).status).not.toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a P-256 signer verifies too', async () => {
    const p256 = createTslSigner({ curve: 'P-256' });
    await expect(verifyListSignature(signTsl(buildTsl(spec()), p256.signer), [x509(p256.ca.certPem)], new Date(), 'the test TSL')).resolves.toBeDefined();
  });

  test.each<[string, (xml: string) => string, string]>([
    ['a changed sequence number', (xml) => xml.replace('<TSLSequenceNumber>10<', '<TSLSequenceNumber>11<'), 'signature'],
    ['a changed service status', (xml) => xml.replace(SVC_STATUS.inaccord, SVC_STATUS.revoked), 'signature'],
    ['a second copy of the signature', (xml) => xml.replace('</TrustServiceStatusList>', `${/<ds:Signature[\s\S]*<\/ds:Signature>/.exec(xml)![0]}</TrustServiceStatusList>`), 'signature'],
    ['a DOCTYPE', (xml) => `<!DOCTYPE x [<!ENTITY a "aaaa">]>${xml}`, 'malformed'],
    ['a truncated document', (xml) => xml.slice(0, xml.length / 2), 'malformed'],
    ['no signature', (xml) => xml.replace(/<ds:Signature[\s\S]*<\/ds:Signature>/, ''), 'signature'],
  ])('%s is refused (%s)', async (_name, tamper, code) => {
    const err = await rejection(tamper(signTsl(buildTsl(spec()), signer)));
    expect(err.code).toBe(code);
  });

  test('a list signed under a foreign CA is refused as signer, naming it', async () => {
    const foreign = createTslSigner({ name: 'Foreign' });
    const err = await rejection(signTsl(buildTsl(spec()), foreign.signer));
    expect(err.code).toBe('signer');
    expect(err.message).toMatch(/Foreign TSL Signing Unit.*does not chain to the list signer CA/);
  });

  test('a signer certificate past its validity is refused', async () => {
    const old = createTslSigner({ now: new Date(Date.now() - 800 * DAY), notAfter: new Date(Date.now() - 400 * DAY) });
    expect((await rejection(signTsl(buildTsl(spec()), old.signer), [x509(old.ca.certPem)])).code).toBe('signer');
  });

  test('a XAdES signing certificate that names another certificate is refused', async () => {
    const other = createTslSigner({ name: 'Other' });
    const digest = crypto.createHash('sha256').update(x509(other.signer.certPem).raw).digest('base64');
    const err = await rejection(signTsl(buildTsl(spec()), signer, { signerDigest: digest }));
    expect([err.code, err.message]).toEqual(['signer', expect.stringMatching(/XAdES signing certificate .* is not the certificate in KeyInfo/)]);
  });

  test('a list without the XAdES reference still verifies (plain XML-DSig)', async () => {
    await expect(verifyListSignature(signTsl(buildTsl(spec()), signer, { xades: false }), [x509(ca.certPem)], new Date(), 'the test TSL')).resolves.toBeDefined();
  });
});

describe('the card issuers of a list', () => {
  const now = new Date();
  const read = async (s: TslSpec) => cardIssuers(readTrustStatusList((await verifyListSignature(signTsl(buildTsl(s), signer), [x509(ca.certPem)], now, 't')).signedXml, 't'), now);
  const other = createCardCa({ commonName: 'Other CA' });

  test.each<[string, Partial<TslSpec['services'][number]>, boolean]>([
    ['an SMC-B CA in accord', { extensionOids: [OID_SMC_B_AUT] }, true],
    ['an HBA CA in accord', { extensionOids: ['1.2.276.0.76.4.75'] }, true],
    ['a CA whose extensions say nothing of what it issues', { extensionOids: undefined }, true],
    ['a CA in status granted', { status: 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted' }, true],
    ['a withdrawn CA', { status: SVC_STATUS.withdrawn }, false],
    ['a revoked CA', { status: SVC_STATUS.revoked }, false],
    ['a component CA (ak_aut only)', { extensionOids: ['1.2.276.0.76.4.79'] }, false],
    ['an OCSP responder', { type: 'http://uri.etsi.org/TrstSvc/Svctype/Certstatus/OCSP' }, false],
  ])('%s: taken %s', async (_name, service, taken) => {
    const issuers = await read(spec({ services: [{ certPem: other.certPem }, { certPem: cardCa.certPem, ...service }] }));
    expect(issuers.some((c) => c.fingerprint256 === x509(cardCa.certPem).fingerprint256)).toBe(taken);
  });

  test('a list without NextUpdate is refused as malformed', () => {
    const xml = buildTsl(spec()).replace(/<NextUpdate>[\s\S]*?<\/NextUpdate>/, '');
    expect(() => readTrustStatusList(xml, 't')).toThrow(/NextUpdate\/dateTime is missing/);
  });

  test('a list of another format is refused, naming its root', () => {
    expect(() => readTrustStatusList('<x:Other xmlns:x="urn:other"/>', 'the test TSL')).toThrow(/the test TSL is not a TrustServiceStatusList.*urn:other Other/);
  });
});
