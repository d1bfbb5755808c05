import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { dataDirInUse } from '../data-dir';

/** Seals private keys at rest with AES-256-GCM under a key-encryption key (KEK). */
export interface KeyEncryption {
  /** Fingerprint of the KEK, stored beside each sealed key. */
  readonly id: string;
  seal(plain: Buffer): string;
  open(sealed: string): Buffer;
}

let processKek: Buffer | undefined;

/** GUARD_KEY_SECRET, else DATA_DIR/guard-kek (embedded store on disk), else a per-process key. */
export function keyEncryptionFor(ctx: AppContext): KeyEncryption {
  let kek: Buffer;
  if (ctx.config.guardKeySecret) {
    kek = crypto.createHash('sha256').update(ctx.config.guardKeySecret).digest();
  } else if (dataDirInUse(ctx)) {
    const file = path.join(ctx.config.dataDir, 'guard-kek');
    if (!fs.existsSync(file)) fs.writeFileSync(file, crypto.randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
    kek = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
  } else {
    if (!processKek && ctx.config.databaseUrl) {
      ctx.logger.warn('GUARD_KEY_SECRET is unset: signing keys are sealed with a per-process key; set it so replicas and restarts share keys');
    }
    processKek ??= crypto.randomBytes(32);
    kek = processKek;
  }
  return aesGcmKeyEncryption(kek);
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
    open(sealed) {
      const raw = Buffer.from(sealed, 'base64');
      const d = crypto.createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]);
    },
  };
}
