import crypto from 'node:crypto';
import { hashOf, TPM_CURVES } from './tpm-algorithms';
import { tpmPublicKey, type TpmPublic } from './tpm-public';
import { tpm2b, u32 } from './tpm-reader';

/**
 * KDFa (TPM 2.0 Part 1 §11.4.10.2): K(i) = HMAC_H(key, [i]₃₂ ‖ label ‖ 0x00 ‖ contextU ‖ contextV ‖ [bits]₃₂),
 * concatenated and truncated to `bits`.
 */
export function kdfa(hash: string, key: Buffer, label: string, contextU: Buffer, contextV: Buffer, bits: number): Buffer {
  const out: Buffer[] = [];
  let length = 0;
  for (let i = 1; length < bits / 8; i++) {
    const block = crypto.createHmac(hash, key).update(Buffer.concat([u32(i), Buffer.from(`${label}\0`, 'latin1'), contextU, contextV, u32(bits)])).digest();
    out.push(block);
    length += block.length;
  }
  return Buffer.concat(out).subarray(0, bits / 8);
}

/** KDFe (Part 1 §11.4.10.3): H([i]₃₂ ‖ Z ‖ label ‖ 0x00 ‖ partyU ‖ partyV), concatenated and truncated. */
export function kdfe(hash: string, z: Buffer, label: string, partyU: Buffer, partyV: Buffer, bits: number): Buffer {
  const out: Buffer[] = [];
  let length = 0;
  for (let i = 1; length < bits / 8; i++) {
    const block = crypto.createHash(hash).update(Buffer.concat([u32(i), z, Buffer.from(`${label}\0`, 'latin1'), partyU, partyV])).digest();
    out.push(block);
    length += block.length;
  }
  return Buffer.concat(out).subarray(0, bits / 8);
}

export interface Credential {
  /** TPM2B_ID_OBJECT with its size prefix. */
  credentialBlob: Buffer;
  /** TPM2B_ENCRYPTED_SECRET with its size prefix. */
  encryptedSecret: Buffer;
}

/**
 * TPM2_MakeCredential done in software (Part 1 §24, Annex B.10.4 and C.6.4): protects `credential`
 * so that only the TPM holding `ek` releases it, and only to the object named `objectName`. All
 * hashing follows the EK's name algorithm, the symmetric key size is the EK's.
 */
export function makeCredential(ek: TpmPublic, objectName: Buffer, credential: Buffer): Credential {
  const hash = hashOf(ek.nameAlg, 'EK name algorithm');
  const { seed, encryptedSecret } = ek.type === 'rsa' ? rsaSeed(ek, hash) : eccSeed(ek, hash);
  const symKey = kdfa(hash.name, seed, 'STORAGE', objectName, Buffer.alloc(0), ek.symmetric.keyBits);
  const cipher = crypto.createCipheriv(`aes-${ek.symmetric.keyBits}-cfb`, symKey, Buffer.alloc(16));
  const encIdentity = Buffer.concat([cipher.update(tpm2b(credential)), cipher.final()]);
  const hmacKey = kdfa(hash.name, seed, 'INTEGRITY', Buffer.alloc(0), Buffer.alloc(0), hash.size * 8);
  const outerHmac = crypto.createHmac(hash.name, hmacKey).update(Buffer.concat([encIdentity, objectName])).digest();
  return { credentialBlob: tpm2b(Buffer.concat([tpm2b(outerHmac), encIdentity])), encryptedSecret: tpm2b(encryptedSecret) };
}

/** RSA EK: a random seed, OAEP-encrypted with label "IDENTITY\0" (Annex B.10.3). */
function rsaSeed(ek: TpmPublic, hash: { name: string; size: number }): { seed: Buffer; encryptedSecret: Buffer } {
  const seed = crypto.randomBytes(hash.size);
  const encryptedSecret = crypto.publicEncrypt(
    { key: tpmPublicKey(ek), padding: crypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: hash.name, oaepLabel: Buffer.from('IDENTITY\0', 'latin1') },
    seed,
  );
  return { seed, encryptedSecret };
}

/** ECC EK: ephemeral ECDH on the EK's curve, seed = KDFe(Z, "IDENTITY", ephemeral x, EK x) (Annex C.6.4). */
function eccSeed(ek: TpmPublic, hash: { name: string; size: number }): { seed: Buffer; encryptedSecret: Buffer } {
  const curve = TPM_CURVES.get(ek.ecc!.curveId)!;
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: curve.crv });
  const z = crypto.diffieHellman({ privateKey, publicKey: tpmPublicKey(ek) });
  const eph = publicKey.export({ format: 'jwk' });
  const ephX = Buffer.from(eph.x!, 'base64url');
  const ephY = Buffer.from(eph.y!, 'base64url');
  const ekX = Buffer.concat([Buffer.alloc(curve.size - ek.ecc!.x.length), ek.ecc!.x]);
  const seed = kdfe(hash.name, z, 'IDENTITY', ephX, ekX, hash.size * 8);
  return { seed, encryptedSecret: Buffer.concat([tpm2b(ephX), tpm2b(ephY)]) };
}
