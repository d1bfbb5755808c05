import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import forge from 'node-forge';
import { SoftwareCard } from '../software-card';
import { ClientInputError } from '../input-error';
import { institutionCardChecks } from './card-checks';

/**
 * The institution card from a PKCS#12 file (RFC 7292), as practices get it for a software SMC-B or
 * export it from other tools: the key whose certificate carries the admission extension, the other
 * certificates as its chain. node-forge reads both the AES files `openssl pkcs12 -export` writes
 * today and the legacy RC2/3DES ones (node:crypto has no RC2, pkijs no PKCS#12 PBE); the MAC is
 * checked, so a wrong password is told apart from a broken file.
 */
export function readP12Card(file: string, password: string | undefined): SoftwareCard {
  const abs = path.resolve(process.cwd(), file);
  const source = `the PKCS#12 file ${file}${abs === file ? '' : ` (${abs})`}`;
  if (password === undefined) throw new ClientInputError('p12Password', `${source} needs its password: set TERMINUS_CLIENT_P12_PASSWORD (library: the p12Password option)`);
  let der: Buffer;
  try {
    der = fs.readFileSync(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ClientInputError('p12', `${source} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? (err as Error).message})`}`);
  }
  const { key, leaf, chain } = readPkcs12(der, password, source, 'p12');
  const card = new SoftwareCard(leaf.toString(), key, chain.map((c) => c.toString()), `the card key in ${source}`);
  return institutionCardChecks(card, `the card certificate in ${source}`, 'p12');
}

/**
 * The first private key of a PKCS#12 container with its certificate, and the other certificates
 * (self-signed roots left out) as its chain. `option` names the input in errors (`p12`, `konnektor`).
 */
export function readPkcs12(der: Buffer, password: string, source: string, option: string): { key: crypto.KeyObject; leaf: crypto.X509Certificate; chain: crypto.X509Certificate[] } {
  const bags = openPfx(der, password, source, option);
  const keys = bags.keys.map((k) => keyObjectOf(k, source, option));
  const certs = bags.certs.map((c) => new crypto.X509Certificate(c));
  const spki = (k: crypto.KeyObject) => k.export({ type: 'spki', format: 'der' });
  for (const key of keys) {
    const own = spki(crypto.createPublicKey(key));
    const leaf = certs.find((c) => spki(c.publicKey).equals(own));
    if (leaf) return { key, leaf, chain: certs.filter((c) => c !== leaf && !c.checkIssued(c)) };
  }
  throw new ClientInputError(option, `${source} holds no private key with its certificate (${keys.length} key(s), ${certs.length} certificate(s))`);
}

function openPfx(der: Buffer, password: string, source: string, option: string): { keys: forge.asn1.Asn1[]; certs: Buffer[] } {
  let asn1: forge.asn1.Asn1;
  try {
    asn1 = forge.asn1.fromDer(forge.util.createBuffer(der.toString('binary')));
  } catch {
    throw new ClientInputError(option, `${source} is not a PKCS#12 file (not DER)`);
  }
  let p12: forge.pkcs12.Pkcs12Pfx;
  try {
    p12 = forge.pkcs12.pkcs12FromAsn1(asn1, true, password);
  } catch (err) {
    const message = (err as Error).message;
    if (/MAC could not be verified|Invalid password|wrong password/i.test(message)) throw new ClientInputError(option === 'p12' ? 'p12Password' : option, `${source}: wrong password${option === 'p12' ? ' (TERMINUS_CLIENT_P12_PASSWORD)' : option === 'konnektor' ? ' (credentials.password)' : ''}`);
    throw new ClientInputError(option, `${source} is not a readable PKCS#12 file (${message})`);
  }
  const { pkcs8ShroudedKeyBag, keyBag, certBag } = forge.pki.oids;
  const bagsOf = (type: string) => p12.getBags({ bagType: type })[type] ?? [];
  const keys = [...bagsOf(pkcs8ShroudedKeyBag), ...bagsOf(keyBag)].map((bag) =>
    // forge parses RSA keys itself and leaves other keys (EC, brainpool) as their PKCS #8 ASN.1.
    bag.key ? forge.pki.wrapRsaPrivateKey(forge.pki.privateKeyToAsn1(bag.key)) : bag.asn1,
  );
  const certs = bagsOf(certBag).map((bag) => Buffer.from(forge.asn1.toDer(bag.cert ? forge.pki.certificateToAsn1(bag.cert) : bag.asn1).getBytes(), 'binary'));
  return { keys, certs };
}

function keyObjectOf(asn1: forge.asn1.Asn1, source: string, option: string): crypto.KeyObject {
  try {
    return crypto.createPrivateKey({ key: Buffer.from(forge.asn1.toDer(asn1).getBytes(), 'binary'), format: 'der', type: 'pkcs8' });
  } catch (err) {
    throw new ClientInputError(option, `${source} holds a private key node:crypto cannot use (${(err as Error).message})`);
  }
}
