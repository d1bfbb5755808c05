import 'reflect-metadata';
import crypto from 'node:crypto';
import {
  AttestationApplicationId,
  AttestationPackageInfo,
  AuthorizationList,
  id_ce_keyDescription,
  KeyDescription,
  RootOfTrust,
  SecurityLevel,
  VerifiedBootState,
  Version,
} from '@peculiar/asn1-android';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import * as x509 from '@peculiar/x509';
import type { EcKey } from '../../../src/client/crypto';

/**
 * A fake Android key attestation world (next-wave.md 3.2, "Fake chain"): a P-384 root and
 * intermediates of our own, leaves carrying a KeyDescription serialised with
 * @peculiar/asn1-android as devices write it. The server trusts the root through
 * PLATFORM_B_TRUST_ANCHORS.
 */
x509.cryptoProvider.set(crypto.webcrypto as never);
const subtle = crypto.webcrypto.subtle;
const EC384 = { name: 'ECDSA', namedCurve: 'P-384', hash: 'SHA-384' } as const;
const notBefore = new Date(Date.now() - 86_400_000);
const notAfter = new Date(Date.now() + 365 * 86_400_000);
const caExtensions = () => [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true)];

export interface AndroidDevice {
  chain: string[];
  signedHashPukClientSig: string;
  key: crypto.KeyObject;
  /** The attested key's signature over the attestation challenge (the token-time posture). */
  sign(challenge: Buffer): string;
}

export interface LeafOptions {
  clientKey: EcKey;
  challengeKey?: EcKey;
  packageName?: string;
  signerDigest?: Buffer;
  securityLevel?: SecurityLevel;
  deviceLocked?: boolean;
  bootState?: VerifiedBootState;
}

export interface AndroidIntermediate {
  serial: string;
  device(o: LeafOptions): Promise<AndroidDevice>;
}

export interface AndroidRoot {
  rootPem: string;
  intermediate(serialHex: string): Promise<AndroidIntermediate>;
}

export const PACKAGE = 'de.praxis.termine';
export const SIGNER = crypto.createHash('sha256').update('the app signing certificate').digest();
const canonical = (k: EcKey) => Buffer.from(JSON.stringify({ crv: 'P-256', kty: 'EC', x: k.publicJwk.x, y: k.publicJwk.y }), 'utf8');

export async function androidRoot(name = 'Test Key Attestation Root'): Promise<AndroidRoot> {
  const rootKeys = await subtle.generateKey(EC384, true, ['sign', 'verify']);
  const root = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: '01', name: `CN=${name}`, notBefore, notAfter, keys: rootKeys, signingAlgorithm: EC384, extensions: caExtensions() });
  return {
    rootPem: root.toString('pem'),
    async intermediate(serialHex) {
      const keys = await subtle.generateKey(EC384, true, ['sign', 'verify']);
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: serialHex,
        subject: `CN=Test Android Intermediate ${serialHex}`,
        issuer: root.subject,
        notBefore,
        notAfter,
        publicKey: keys.publicKey,
        signingKey: rootKeys.privateKey,
        signingAlgorithm: EC384,
        extensions: caExtensions(),
      });
      let leafSerial = 0x100;
      return {
        serial: serialHex,
        async device(o) {
          const leafKeys = await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
          const appId = new AttestationApplicationId({
            packageInfos: [new AttestationPackageInfo({ packageName: Buffer.from(o.packageName ?? PACKAGE) as never, version: 7 })],
            signatureDigests: [Buffer.from(o.signerDigest ?? SIGNER) as never],
          });
          const level = o.securityLevel ?? SecurityLevel.trustedEnvironment;
          const description = new KeyDescription({
            attestationVersion: Version.keyMint2,
            attestationSecurityLevel: level,
            keymasterVersion: 200,
            keymasterSecurityLevel: level,
            attestationChallenge: new OctetString(crypto.createHash('sha256').update(canonical(o.challengeKey ?? o.clientKey)).digest()),
            uniqueId: new OctetString(new Uint8Array(0)),
            softwareEnforced: new AuthorizationList({ attestationApplicationId: new OctetString(AsnConvert.serialize(appId)) }),
            teeEnforced: new AuthorizationList({
              rootOfTrust: new RootOfTrust({ verifiedBootKey: new OctetString(crypto.randomBytes(32)), deviceLocked: o.deviceLocked ?? true, verifiedBootState: o.bootState ?? VerifiedBootState.verified }),
              osVersion: 150000,
              osPatchLevel: 202510,
            }),
          });
          const leaf = await x509.X509CertificateGenerator.create({
            serialNumber: (leafSerial++).toString(16),
            subject: 'CN=Android Keystore Key',
            issuer: cert.subject,
            notBefore,
            notAfter,
            publicKey: leafKeys.publicKey,
            signingKey: keys.privateKey,
            signingAlgorithm: EC384,
            extensions: [new x509.Extension(id_ce_keyDescription, false, AsnConvert.serialize(description))],
          });
          const key = crypto.KeyObject.from(leafKeys.privateKey);
          return {
            chain: [Buffer.from(leaf.rawData).toString('base64'), Buffer.from(cert.rawData).toString('base64'), root.toString('base64')],
            signedHashPukClientSig: crypto.sign('sha256', canonical(o.clientKey), o.clientKey.privateKey).toString('base64url'),
            key,
            sign: (challenge) => crypto.sign('sha256', challenge, key).toString('base64url'),
          };
        },
      };
    },
  };
}
