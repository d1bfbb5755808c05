import crypto from 'node:crypto';
import {
  AttestationApplicationId,
  id_ce_keyDescription,
  KeyDescription,
  NonStandardKeyDescription,
  SecurityLevel,
  VerifiedBootState,
  type AuthorizationList,
  type RootOfTrust,
} from '@peculiar/asn1-android';
import { AsnConvert } from '@peculiar/asn1-schema';
import { Certificate } from '@peculiar/asn1-x509';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { PlatformBPackage } from '../../../config';
import type { AppContext } from '../../../context';
import { attestationChallenge } from '../../../common/attestation-challenge';
import { InvalidRequest } from '../../errors';
import { PathValidationError, validatePath } from '../../pki/path-validation';
import type { AnchorSource } from '../../pki/anchor-source';
import type { AttestationContext, AttestationResult, ClientStatement, PostureVerifier } from '../index';
import { canonicalJwk, decodeBase64, refused, sha256, verifiesEs256 } from '../platform-a/app-attest';
import { attestationResult, printableMembers, PRODUCT_MEMBERS, registrationFor } from '../posture-result';
import type { RegisteringClient, RegistrationProof, RegistrationVerifier } from '../registration';
import type { RevocationList } from './revocation-list';
import { ATTESTATION_TYPE } from '../../../common/attestation-types';

/** What a platform_b registration keeps (`guard_client.attestation.platform_b`). */
export interface PlatformBRegistration {
  package_name: string;
  security_level: 'trusted_environment' | 'strongbox';
  /** The attested key (SPKI DER, base64) and its JWK thumbprint. */
  key: string;
  key_jkt: string;
  os_version?: number;
  os_patch_level?: number;
  integrity_token?: string;
}

/** The facts of a KeyDescription this guard judges, whichever encoding the device used. */
interface KeyFacts {
  attestationSecurityLevel: SecurityLevel;
  keyMintSecurityLevel: SecurityLevel;
  challenge: Buffer;
  rootOfTrust?: RootOfTrust;
  applicationId?: ArrayBuffer;
  osVersion?: number;
  osPatchLevel?: number;
}

/**
 * `attestation_type: "platform_b"` (Android key attestation; docs/requirements.md, Mobile clients and e-mail codes), one named step each,
 * each failure 400 `invalid_request` with its token: the chain (leaf first) to
 * PLATFORM_B_TRUST_ANCHORS by pkijs (`attestation_chain_untrusted`), none of its certificates
 * REVOKED in the status list (`certificate_revoked`; the list unreadable for a day: 503), the
 * client key's self-signature (`client_key_binding`), the KeyDescription (`attestation_format`)
 * with `attestationChallenge` = SHA-256(canonical client JWK) (`attestation_challenge_mismatch`),
 * TEE or StrongBox for attestation and key (`security_level_too_low`), a locked device with
 * verified boot (`boot_state_not_verified`), and the package with its signer digest from
 * PLATFORM_B_PACKAGES (`app_id_not_allowed`). The integrity token is kept, not verified. Every
 * platform_b registration binds an e-mail address.
 */
export function platformBRegistrationVerifier(anchors: AnchorSource, packages: readonly PlatformBPackage[], revocations: RevocationList): RegistrationVerifier {
  return {
    async verify(body: Record<string, unknown>, client: RegisteringClient, ctx: AppContext): Promise<RegistrationProof> {
      const chain = chainOf(body.platform_b_key_attestation_certificate_chain);
      try {
        await validatePath(chain[0], chain.slice(1), await anchors(), ctx.now());
      } catch (err) {
        if (err instanceof PathValidationError) throw refused('attestation_chain_untrusted', err.message);
        throw err;
      }
      const certs = chain.map((der) => new crypto.X509Certificate(der));
      const revoked = await revocations.revokedAmong(certs.map((c) => c.serialNumber));
      if (revoked) throw refused('certificate_revoked', `certificate ${revoked.toLowerCase()} of the chain is revoked in the attestation status list`);
      const signature = decodeBase64(body.signed_hash_puk_client_sig, 'signed_hash_puk_client_sig');
      const clientKey = crypto.createPublicKey({ key: client.jwk as crypto.JsonWebKey, format: 'jwk' });
      if (!verifiesEs256(clientKey, canonicalJwk(client.jwk), signature)) throw refused('client_key_binding', "signed_hash_puk_client_sig is not the client key's signature over its canonical JWK");
      const facts = keyFactsOf(certs[0]);
      if (!facts.challenge.equals(sha256(canonicalJwk(client.jwk)))) throw refused('attestation_challenge_mismatch', 'attestationChallenge is not SHA-256 of the client key: attested for another key');
      const hardware = [SecurityLevel.trustedEnvironment, SecurityLevel.strongBox];
      if (!hardware.includes(facts.attestationSecurityLevel) || !hardware.includes(facts.keyMintSecurityLevel)) {
        throw refused('security_level_too_low', 'the key and its attestation must live in a TEE or StrongBox, not in software');
      }
      if (!facts.rootOfTrust?.deviceLocked || facts.rootOfTrust.verifiedBootState !== VerifiedBootState.verified) {
        throw refused('boot_state_not_verified', 'the device must be locked and have booted verified');
      }
      const app = appOf(facts.applicationId, packages);
      const key = certs[0].publicKey;
      if (body.puk_ak_sig !== undefined) {
        let given: crypto.KeyObject | undefined;
        try {
          given = crypto.createPublicKey({ key: body.puk_ak_sig as crypto.JsonWebKey, format: 'jwk' });
        } catch {
          given = undefined;
        }
        if (!given?.equals(key)) throw refused('key_id_mismatch', 'puk_ak_sig is not the attested key');
      }
      const integrity = body.platform_b_integrity_token;
      if (integrity !== undefined && (typeof integrity !== 'string' || integrity.length > 16_384)) throw new InvalidRequest('platform_b_integrity_token must be a string of at most 16 KiB');
      const registration: PlatformBRegistration = {
        package_name: app.packageName,
        security_level: facts.keyMintSecurityLevel === SecurityLevel.strongBox ? 'strongbox' : 'trusted_environment',
        key: key.export({ format: 'der', type: 'spki' }).toString('base64'),
        key_jkt: await calculateJwkThumbprint(key.export({ format: 'jwk' }) as JWK),
        ...(facts.osVersion !== undefined ? { os_version: facts.osVersion } : {}),
        ...(facts.osPatchLevel !== undefined ? { os_patch_level: facts.osPatchLevel } : {}),
        ...(typeof integrity === 'string' ? { integrity_token: integrity } : {}),
      };
      return { attestation: { platform_b: registration }, userEmail: 'required' };
    },
  };
}

function chainOf(v: unknown): Buffer[] {
  if (!Array.isArray(v) || v.length < 2 || v.length > 10) throw refused('attestation_format', 'platform_b_key_attestation_certificate_chain must list 2 to 10 base64 certificates, leaf first');
  const chain = v.map((c) => decodeBase64(c, 'platform_b_key_attestation_certificate_chain'));
  for (const der of chain) {
    try {
      new crypto.X509Certificate(der);
    } catch {
      throw refused('attestation_format', 'a certificate of the chain does not parse');
    }
  }
  return chain;
}

/** The KeyDescription extension, in the standard encoding or the out-of-order one some devices write. */
function keyFactsOf(leaf: crypto.X509Certificate): KeyFacts {
  const ext = extensionValue(leaf.raw, id_ce_keyDescription);
  if (!ext) throw refused('attestation_format', 'the leaf certificate carries no key attestation extension');
  try {
    const d = AsnConvert.parse(ext, KeyDescription);
    const hw: AuthorizationList = d.teeEnforced;
    return {
      attestationSecurityLevel: d.attestationSecurityLevel,
      keyMintSecurityLevel: d.keymasterSecurityLevel,
      challenge: Buffer.from(d.attestationChallenge.buffer),
      rootOfTrust: hw.rootOfTrust,
      applicationId: (d.softwareEnforced.attestationApplicationId ?? hw.attestationApplicationId)?.buffer,
      osVersion: hw.osVersion,
      osPatchLevel: hw.osPatchLevel,
    };
  } catch {
    try {
      const d = AsnConvert.parse(ext, NonStandardKeyDescription);
      return {
        attestationSecurityLevel: d.attestationSecurityLevel,
        keyMintSecurityLevel: d.keymasterSecurityLevel,
        challenge: Buffer.from(d.attestationChallenge.buffer),
        rootOfTrust: d.teeEnforced.findProperty('rootOfTrust'),
        applicationId: (d.softwareEnforced.findProperty('attestationApplicationId') ?? d.teeEnforced.findProperty('attestationApplicationId'))?.buffer,
        osVersion: d.teeEnforced.findProperty('osVersion'),
        osPatchLevel: d.teeEnforced.findProperty('osPatchLevel'),
      };
    } catch {
      throw refused('attestation_format', 'the key attestation extension does not parse as a KeyDescription');
    }
  }
}

/** An extension's value (the OCTET STRING's content) by OID, read with the ASN.1 library. */
function extensionValue(certDer: Buffer, oid: string): ArrayBuffer | undefined {
  const cert = AsnConvert.parse(certDer, Certificate);
  const ext = cert.tbsCertificate.extensions?.find((e) => e.extnID === oid);
  return ext?.extnValue.buffer;
}

/** `attestationApplicationId`: one of the packages, signed with the digest configured for it. */
function appOf(raw: ArrayBuffer | undefined, packages: readonly PlatformBPackage[]): PlatformBPackage {
  if (!raw) throw refused('app_id_not_allowed', 'the attestation names no application');
  let id: AttestationApplicationId;
  try {
    id = AsnConvert.parse(raw, AttestationApplicationId);
  } catch {
    throw refused('attestation_format', 'attestationApplicationId does not parse');
  }
  const names = id.packageInfos.map((p) => Buffer.from(p.packageName as unknown as ArrayBuffer).toString('utf8'));
  const digests = id.signatureDigests.map((d) => Buffer.from(d as unknown as ArrayBuffer).toString('hex'));
  const app = packages.find((p) => names.includes(p.packageName));
  if (!app) throw refused('app_id_not_allowed', `package ${names.join(', ') || '(none)'} is not in PLATFORM_B_PACKAGES`);
  if (!digests.includes(app.signerDigest)) throw refused('app_id_not_allowed', `${app.packageName} is signed with another certificate than PLATFORM_B_PACKAGES names`);
  return app;
}

/**
 * `posture_type: "platform_b"` at token exchange: `posture.platform_b_signature`, the attested
 * key's ES256 signature over the attestation challenge of this nonce.
 */
export const platformBPostureVerifier: PostureVerifier = {
  async verify(statement: ClientStatement, actx: AttestationContext): Promise<AttestationResult> {
    const registered = registrationFor<PlatformBRegistration>(actx, ATTESTATION_TYPE.platformB);
    const p = printableMembers(statement.posture, PRODUCT_MEMBERS);
    const signature = decodeBase64(statement.posture.platform_b_signature, 'client_statement.posture.platform_b_signature');
    const challenge = Buffer.from(attestationChallenge(actx.clientJkt, actx.nonce), 'base64url');
    const key = crypto.createPublicKey({ key: Buffer.from(registered.key, 'base64'), format: 'der', type: 'spki' });
    if (!verifiesEs256(key, challenge, signature)) throw refused('assertion_signature', 'platform_b_signature is not by the attested key over this attestation challenge');
    return attestationResult(statement, p, {
      postureType: ATTESTATION_TYPE.platformB,
      result: { platform_b: { package_name: registered.package_name, security_level: registered.security_level, os_version: registered.os_version, os_patch_level: registered.os_patch_level } },
      hardware: { attestationKeyJkt: registered.key_jkt },
    });
  },
};
