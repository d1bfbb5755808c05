import crypto from 'node:crypto';

/** Seals secrets at rest (signing keys, Subscription channel headers) with AES-256-GCM under a key-encryption key (KEK). */
export interface KeyEncryption {
  /** Fingerprint of the KEK, stored beside each sealed value. */
  readonly id: string;
  seal(plain: Buffer): string;
  open(sealed: string): Buffer;
  /** HMAC-SHA256 of `data` under a key derived from the KEK for `label` (one-time codes at rest). */
  mac(label: string, data: Buffer): Buffer;
}

export function aesGcmKeyEncryption(kek: Buffer): KeyEncryption {
  return {
    id: crypto.createHash('sha256').update(kek).digest('hex').slice(0, 16),
    seal(plain) {
      const iv = crypto.randomBytes(12);
      const c = crypto.createCipheriv('aes-256-gcm', kek, iv);
      const body = Buffer.concat([c.update(plain), c.final()]);
      return Buffer.concat([iv, body, c.getAuthTag()]).toString('base64');
    },
    mac(label, data) {
      const key = crypto.createHmac('sha256', kek).update(`terminus mac ${label}`).digest();
      return crypto.createHmac('sha256', key).update(data).digest();
    },
    open(sealed) {
      const raw = Buffer.from(sealed, 'base64');
      const d = crypto.createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]);
    },
  };
}
