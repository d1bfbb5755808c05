import crypto from 'node:crypto';
import * as pkijs from 'pkijs';

/** Signature algorithm OIDs → Node hash and padding (RFC 5758, RFC 4055, RFC 8017). */
const SIGNATURE_ALGORITHMS: Record<string, { hash: string; pss?: boolean }> = {
  '1.2.840.10045.4.3.2': { hash: 'sha256' },
  '1.2.840.10045.4.3.3': { hash: 'sha384' },
  '1.2.840.10045.4.3.4': { hash: 'sha512' },
  '1.2.840.113549.1.1.11': { hash: 'sha256' },
  '1.2.840.113549.1.1.12': { hash: 'sha384' },
  '1.2.840.113549.1.1.13': { hash: 'sha512' },
  '1.2.840.113549.1.1.5': { hash: 'sha1' },
};
const RSASSA_PSS = '1.2.840.113549.1.1.10';

/**
 * pkijs with the signature math of node:crypto: WebCrypto knows no brainpool curve (institution
 * cards use brainpoolP256r1), OpenSSL does. Path building and the RFC 5280 checks stay pkijs's.
 */
class NodeSignatureEngine extends pkijs.CryptoEngine {
  constructor() {
    super({ name: 'node', crypto: globalThis.crypto as unknown as ConstructorParameters<typeof pkijs.CryptoEngine>[0]['crypto'] });
  }

  override async verifyWithPublicKey(
    data: Parameters<pkijs.CryptoEngine['verifyWithPublicKey']>[0],
    signature: { valueBlock: { valueHexView: Uint8Array } },
    publicKeyInfo: pkijs.PublicKeyInfo,
    signatureAlgorithm: pkijs.AlgorithmIdentifier,
  ): Promise<boolean> {
    const key = crypto.createPublicKey({ key: Buffer.from(publicKeyInfo.toSchema().toBER(false)), format: 'der', type: 'spki' });
    const bytes = Buffer.from(ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data as ArrayBuffer));
    const sig = Buffer.from(signature.valueBlock.valueHexView);
    if (signatureAlgorithm.algorithmId === RSASSA_PSS) {
      const params = new pkijs.RSASSAPSSParams({ schema: signatureAlgorithm.algorithmParams });
      const hash = { '2.16.840.1.101.3.4.2.1': 'sha256', '2.16.840.1.101.3.4.2.2': 'sha384', '2.16.840.1.101.3.4.2.3': 'sha512' }[params.hashAlgorithm.algorithmId];
      if (!hash) return false;
      return crypto.verify(hash, bytes, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: params.saltLength }, sig);
    }
    const alg = SIGNATURE_ALGORITHMS[signatureAlgorithm.algorithmId];
    if (!alg) return false;
    return crypto.verify(alg.hash, bytes, key, sig);
  }
}

/** pkijs with node:crypto signatures: also for OCSP responses signed by a brainpool key. */
export const nodeCryptoEngine: pkijs.CryptoEngine = new NodeSignatureEngine();
