import crypto from 'node:crypto';
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { AppContext } from '../../../context';
import { canonicalEcJwk } from '../../../common/canonical-jwk';
import { InvalidRequest } from '../../errors';
import { EkCertificateError, verifyEkCertificate } from '../../pki/ek-trust';
import type { AnchorSource } from '../../pki/anchor-source';
import type { RegistrationProof, RegistrationVerifier, RegisteringClient } from '../registration';
import { makeCredential } from './make-credential';
import { hashOf, TPM_ALG, TPM_CURVES, TPMA_OBJECT } from './tpm-algorithms';
import { ekPublicFromJwk, parseTpm2bPublic, tpmName, tpmPublicKey, type TpmPublic } from './tpm-public';
import { TpmStructureError } from './tpm-reader';
import { TPM_ACTIVATION } from '../../../common/attestation-types';

/** What a TPM registration stores with the client: the AK later quotes verify against. */
export interface TpmRegistration {
  /** base64 TPM2B_PUBLIC of the AK. */
  ak_public: string;
  /** RFC 7638 thumbprint of the AK's public key (`puk_ak_sig` of svc_att_token). */
  ak_jkt: string;
  /** base64 DER of the EK certificate. */
  ek_certificate: string;
}

/** 400 `invalid_request` whose description starts with the stable token (docs/requirements.md, Hardware attestation). */
const refuse = (token: string, message: string) => new InvalidRequest(`${token}: ${message}`);

/**
 * `attestation_type: "tpm"` (docs/requirements.md, Hardware attestation), each check a named step: structures, EK and AK
 * attributes, EK chain to TPM_EK_TRUST_ANCHORS, EK certificate key, the AK's signature over the
 * client key, then MakeCredential to the EK with the AK's Name. The client is registered only once
 * it returns the secret at /register/verify: the TPM releases it only to the object with that Name
 * inside the TPM that holds the EK, which proves the attributes checked here.
 */
export function tpmRegistrationVerifier(anchors: AnchorSource): RegistrationVerifier {
  return {
    async verify(body: Record<string, unknown>, client: RegisteringClient, ctx: AppContext): Promise<RegistrationProof> {
      const m = membersArePresent(body, client);
      const ek = structure(() => readEkPublic(m.pukEkEnc));
      ekAttributesAreAnEk(ek);
      const akBytes = base64(m.pukAkSig, 'puk_ak_sig');
      const ak = structure(() => parseTpm2bPublic(akBytes, 'puk_ak_sig'));
      akAttributesAreAnAk(ak);
      await ekCertificateIsTrusted(m, ek, await anchors(), ctx.now());
      clientKeyIsSignedByTheAk(ak, client, m.signature);
      const secret = crypto.randomBytes(32);
      const credential = makeCredential(ek, tpmName(ak), secret);
      const akJwk = tpmPublicKey(ak).export({ format: 'jwk' });
      const registration: TpmRegistration = {
        ak_public: akBytes.toString('base64'),
        ak_jkt: await calculateJwkThumbprint(akJwk as JWK),
        ek_certificate: m.ekCert.toString('base64'),
      };
      return {
        attestation: { tpm: registration },
        challenge: {
          type: TPM_ACTIVATION,
          answer: secret,
          response: {
            tpm_credential_blob: credential.credentialBlob.toString('base64'),
            tpm_encrypted_secret: credential.encryptedSecret.toString('base64'),
          },
        },
      };
    },
  };
}

interface TpmMembers {
  pukEkEnc: unknown;
  ekCert: Buffer;
  chain: Buffer[];
  pukAkSig: string;
  signature: Buffer;
}

function membersArePresent(b: Record<string, unknown>, client: RegisteringClient): TpmMembers {
  for (const m of ['c_ek_enc', 'puk_ak_sig', 'signed_hash_puk_client_sig'] as const) {
    if (typeof b[m] !== 'string' || b[m] === '') throw new InvalidRequest(`${m} is required for attestation_type tpm`);
  }
  if (typeof b.puk_ek_enc !== 'string' && (typeof b.puk_ek_enc !== 'object' || b.puk_ek_enc === null || Array.isArray(b.puk_ek_enc))) {
    throw new InvalidRequest('puk_ek_enc must be a base64 TPM2B_PUBLIC or a JWK');
  }
  const chain = b.tpm_ek_certificate_chain ?? [];
  if (!Array.isArray(chain) || chain.length > 4 || !chain.every((c) => typeof c === 'string')) {
    throw new InvalidRequest('tpm_ek_certificate_chain must be an array of at most 4 base64 certificates');
  }
  if (b.puk_client_sig !== undefined) {
    const p = b.puk_client_sig as Record<string, unknown> | null;
    if (typeof p !== 'object' || p === null || p.kty !== client.jwk.kty || p.crv !== client.jwk.crv || p.x !== client.jwk.x || p.y !== client.jwk.y) {
      throw new InvalidRequest('puk_client_sig must be the key in jwks');
    }
  }
  return {
    pukEkEnc: b.puk_ek_enc,
    ekCert: base64(b.c_ek_enc as string, 'c_ek_enc'),
    chain: (chain as string[]).map((c, i) => base64(c, `tpm_ek_certificate_chain[${i}]`)),
    pukAkSig: b.puk_ak_sig as string,
    signature: base64(b.signed_hash_puk_client_sig as string, 'signed_hash_puk_client_sig', true),
  };
}

function base64(v: string, what: string, url = false): Buffer {
  const ok = url ? /^[A-Za-z0-9_-]+={0,2}$/.test(v) : /^[A-Za-z0-9+/]+={0,2}$/.test(v);
  if (!ok || v.length > 16_384) throw new InvalidRequest(`${what} must be ${url ? 'base64url' : 'base64'}`);
  return Buffer.from(v, url ? 'base64url' : 'base64');
}

function structure<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof TpmStructureError) throw refuse('malformed_tpm_structure', err.message);
    throw err;
  }
}

function readEkPublic(v: unknown): TpmPublic {
  if (typeof v === 'string') return parseTpm2bPublic(base64(v, 'puk_ek_enc'), 'puk_ek_enc');
  return ekPublicFromJwk(v as Record<string, unknown>);
}

const has = (p: TpmPublic, bits: number[]) => bits.every((b) => (p.attributes & b) === b);

function ekAttributesAreAnEk(ek: TpmPublic): void {
  const { fixedTPM, fixedParent, sensitiveDataOrigin, restricted, decrypt, sign } = TPMA_OBJECT;
  if (!has(ek, [fixedTPM, fixedParent, sensitiveDataOrigin, restricted, decrypt]) || (ek.attributes & sign) !== 0) {
    throw refuse('ek_attributes', 'the EK must be fixedTPM, fixedParent, sensitiveDataOrigin, restricted and decrypt, and not sign');
  }
  if (ek.symmetric.alg !== TPM_ALG.AES || ek.symmetric.mode !== TPM_ALG.CFB || ![128, 256].includes(ek.symmetric.keyBits)) {
    throw refuse('ek_attributes', 'the EK must protect with AES-128 or AES-256 in CFB mode');
  }
  if (ek.type === 'ecc' && ek.ecc!.curveId === 0x0005 && ek.nameAlg !== TPM_ALG.SHA512) throw refuse('ek_attributes', 'unsupported EK template');
}

function akAttributesAreAnAk(ak: TpmPublic): void {
  const { fixedTPM, fixedParent, sensitiveDataOrigin, restricted, sign, decrypt } = TPMA_OBJECT;
  if (!has(ak, [fixedTPM, fixedParent, sensitiveDataOrigin, restricted, sign]) || (ak.attributes & decrypt) !== 0) {
    throw refuse('ak_attributes', 'the AK must be fixedTPM, fixedParent, sensitiveDataOrigin, restricted and sign, and not decrypt');
  }
  if (![TPM_ALG.SHA256, TPM_ALG.SHA384].includes(ak.nameAlg as 0x000b) || ![TPM_ALG.SHA256, TPM_ALG.SHA384].includes(ak.scheme.hashAlg as 0x000b)) {
    throw refuse('ak_attributes', 'the AK must use SHA-256 or SHA-384');
  }
  const eccOk = ak.type === 'ecc' && ak.scheme.alg === TPM_ALG.ECDSA && ['P-256', 'P-384'].includes(TPM_CURVES.get(ak.ecc!.curveId)!.crv);
  const rsaOk = ak.type === 'rsa' && ak.rsa!.keyBits >= 2048 && (ak.scheme.alg === TPM_ALG.RSASSA || ak.scheme.alg === TPM_ALG.RSAPSS);
  if (!eccOk && !rsaOk) throw refuse('ak_attributes', 'the AK must be ECDSA on P-256/P-384 or RSASSA/RSAPSS with at least 2048 bits');
}

async function ekCertificateIsTrusted(m: TpmMembers, ek: TpmPublic, anchors: Buffer[], now: Date): Promise<void> {
  try {
    await verifyEkCertificate(m.ekCert, m.chain, anchors, now, structure(() => tpmPublicKey(ek)));
  } catch (err) {
    if (err instanceof EkCertificateError) throw refuse(err.token, err.message);
    throw err;
  }
}

/** signed_hash_puk_client_sig: TPM2_Sign by the AK over SHA-256 of the client key's RFC 7638 canonical JWK. */
function clientKeyIsSignedByTheAk(ak: TpmPublic, client: RegisteringClient, signature: Buffer): void {
  const canonical = canonicalEcJwk(client.jwk);
  const hash = hashOf(ak.scheme.hashAlg, 'AK scheme').name;
  let ok = false;
  try {
    const key = tpmPublicKey(ak);
    ok =
      ak.type === 'ecc'
        ? crypto.verify(hash, canonical, { key, dsaEncoding: 'der' }, signature)
        : crypto.verify(hash, canonical, { key, padding: ak.scheme.alg === TPM_ALG.RSAPSS ? crypto.constants.RSA_PKCS1_PSS_PADDING : crypto.constants.RSA_PKCS1_PADDING }, signature);
  } catch {
    ok = false;
  }
  if (!ok) throw refuse('client_key_binding', 'signed_hash_puk_client_sig is not the AK signature over the client instance key');
}
