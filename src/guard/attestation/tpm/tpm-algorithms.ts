/** TPM_ALG_ID and TPM_ECC_CURVE values (TPM 2.0 Part 2 §6.3, §6.4) the guard accepts. */
export const TPM_ALG = {
  RSA: 0x0001,
  SHA1: 0x0004,
  AES: 0x0006,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  RSASSA: 0x0014,
  RSAPSS: 0x0016,
  ECDSA: 0x0018,
  ECC: 0x0023,
  CFB: 0x0043,
} as const;

/** Hash algorithms by TPM_ALG_ID: Node's name and the digest size. */
export const TPM_HASHES: ReadonlyMap<number, { name: 'sha1' | 'sha256' | 'sha384' | 'sha512'; size: number }> = new Map([
  [TPM_ALG.SHA1, { name: 'sha1', size: 20 }],
  [TPM_ALG.SHA256, { name: 'sha256', size: 32 }],
  [TPM_ALG.SHA384, { name: 'sha384', size: 48 }],
  [TPM_ALG.SHA512, { name: 'sha512', size: 64 }],
] as const);

/** TPM_ECC_CURVE → JWK crv and coordinate size. */
export const TPM_CURVES: ReadonlyMap<number, { crv: 'P-256' | 'P-384' | 'P-521'; size: number }> = new Map([
  [0x0003, { crv: 'P-256', size: 32 }],
  [0x0004, { crv: 'P-384', size: 48 }],
  [0x0005, { crv: 'P-521', size: 66 }],
] as const);

/** TPMA_OBJECT bits (Part 2 §8.3). */
export const TPMA_OBJECT = {
  fixedTPM: 1 << 1,
  stClear: 1 << 2,
  fixedParent: 1 << 4,
  sensitiveDataOrigin: 1 << 5,
  userWithAuth: 1 << 6,
  adminWithPolicy: 1 << 7,
  noDA: 1 << 10,
  encryptedDuplication: 1 << 11,
  restricted: 1 << 16,
  decrypt: 1 << 17,
  sign: 1 << 18,
} as const;

export function hashOf(alg: number, what: string): { name: 'sha1' | 'sha256' | 'sha384' | 'sha512'; size: number } {
  const h = TPM_HASHES.get(alg);
  if (!h) throw new Error(`${what}: unsupported hash algorithm 0x${alg.toString(16)}`);
  return h;
}
