// @peculiar/x509 resolves its services through tsyringe, which needs the reflect polyfill first.
import 'reflect-metadata';
import crypto from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { encode as encodeCbor } from 'cbor-x';
import type { EcKey } from '../../../src/client/crypto';

/**
 * A fake Apple App Attest world for tests (next-wave.md 3.1, "Fake chain"): a P-384 root and
 * intermediate of our own and devices whose attestation objects have Apple's exact layout, built
 * with @peculiar/x509 and cbor-x as Apple builds them. The server checks them against this root
 * through PLATFORM_A_TRUST_ANCHORS.
 */
x509.cryptoProvider.set(crypto.webcrypto as never);

const EC384 = { name: 'ECDSA', namedCurve: 'P-384', hash: 'SHA-384' } as const;
const EC256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const subtle = crypto.webcrypto.subtle;
type CryptoKey = crypto.webcrypto.CryptoKey;
type CryptoKeyPair = crypto.webcrypto.CryptoKeyPair;

export interface AppleCa {
  rootPem: string;
  issue(publicKey: CryptoKey, nonce: Buffer): Promise<Buffer>;
  intermediateDer: Buffer;
}

export async function appleCa(name = 'Test App Attestation Root CA'): Promise<AppleCa> {
  const rootKeys = (await subtle.generateKey(EC384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const notBefore = new Date(Date.now() - 86_400_000);
  const notAfter = new Date(Date.now() + 365 * 86_400_000);
  const ca = (keyUsage: number) => [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(keyUsage, true)];
  const root = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: '01', name: `CN=${name}`, notBefore, notAfter, keys: rootKeys, signingAlgorithm: EC384, extensions: ca(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign) });
  const intKeys = (await subtle.generateKey(EC384, true, ['sign', 'verify'])) as CryptoKeyPair;
  const intermediate = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'CN=Test App Attestation CA 1',
    issuer: root.subject,
    notBefore,
    notAfter,
    publicKey: intKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: EC384,
    extensions: ca(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign),
  });
  let serial = 16;
  return {
    rootPem: root.toString('pem'),
    intermediateDer: Buffer.from(intermediate.rawData),
    async issue(publicKey, nonce) {
      // Apple's extension: SEQUENCE { [1] EXPLICIT OCTET STRING nonce }.
      const value = Buffer.concat([Buffer.from([0x30, 0x24, 0xa1, 0x22, 0x04, 0x20]), nonce]);
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: (serial++).toString(16).padStart(2, '0'),
        subject: `CN=${crypto.randomBytes(16).toString('hex')}`,
        issuer: intermediate.subject,
        notBefore,
        notAfter,
        publicKey,
        signingKey: intKeys.privateKey,
        signingAlgorithm: EC384,
        extensions: [new x509.Extension('1.2.840.113635.100.8.2', false, value)],
      });
      return Buffer.from(cert.rawData);
    },
  };
}

export const sha256 = (...parts: Buffer[]) => crypto.createHash('sha256').update(Buffer.concat(parts)).digest();
const canonical = (k: EcKey) => Buffer.from(JSON.stringify({ crv: 'P-256', kty: 'EC', x: k.publicJwk.x, y: k.publicJwk.y }), 'utf8');

export interface Device {
  /** base64 CBOR attestation object. */
  attestationObject: string;
  /** The client key's signature over SHA-256 of its canonical JWK (base64url DER). */
  signedHashPukClientSig: string;
  /** The App Attest key, for assertions. */
  key: crypto.KeyObject;
  keyJwk: crypto.JsonWebKey;
  appId: string;
  counter: number;
  /** An assertion over `clientData` with the next counter (or the one given). */
  assert(clientData: Buffer, counter?: number): string;
}

export interface DeviceOptions {
  appId: string;
  clientKey: EcKey;
  /** The key the nonce is computed over (default the client key). */
  nonceKey?: EcKey;
  development?: boolean;
  counter?: number;
  ca?: AppleCa;
}

export async function attestDevice(ca: AppleCa, o: DeviceOptions): Promise<Device> {
  const keys = (await subtle.generateKey(EC256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const jwk = (await subtle.exportKey('jwk', keys.publicKey)) as { x: string; y: string };
  const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url')]);
  const keyId = sha256(point);
  const aaguid = o.development ? Buffer.from('appattestdevelop', 'ascii') : Buffer.concat([Buffer.from('appattest', 'ascii'), Buffer.alloc(7)]);
  const counter = Buffer.alloc(4);
  counter.writeUInt32BE(o.counter ?? 0);
  const idLength = Buffer.alloc(2);
  idLength.writeUInt16BE(keyId.length);
  const cose = Buffer.from(encodeCbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x, 'base64url')], [-3, Buffer.from(jwk.y, 'base64url')]])));
  const authData = Buffer.concat([sha256(Buffer.from(o.appId, 'utf8')), Buffer.from([0x40]), counter, aaguid, idLength, keyId, cose]);
  const nonce = sha256(authData, sha256(canonical(o.nonceKey ?? o.clientKey)));
  const credCert = await ca.issue(keys.publicKey, nonce);
  const attestation = Buffer.from(encodeCbor({ fmt: 'apple-appattest', attStmt: { x5c: [credCert, ca.intermediateDer], receipt: Buffer.from('receipt') }, authData }));
  const key = crypto.KeyObject.from(keys.privateKey);
  const device: Device = {
    attestationObject: attestation.toString('base64'),
    signedHashPukClientSig: crypto.sign('sha256', canonical(o.clientKey), o.clientKey.privateKey).toString('base64url'),
    key,
    keyJwk: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y },
    appId: o.appId,
    counter: 0,
    assert(clientData, n) {
      device.counter = n ?? device.counter + 1;
      const c = Buffer.alloc(4);
      c.writeUInt32BE(device.counter);
      const authenticatorData = Buffer.concat([sha256(Buffer.from(device.appId, 'utf8')), Buffer.from([0x40]), c]);
      const signature = crypto.sign('sha256', sha256(authenticatorData, sha256(clientData)), key);
      return Buffer.from(encodeCbor({ signature, authenticatorData })).toString('base64');
    },
  };
  return device;
}
