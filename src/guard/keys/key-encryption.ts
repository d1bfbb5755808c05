import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { dataDirInUse } from '../data-dir';
import { aesGcmKeyEncryption, type KeyEncryption } from '../../server-lib/key-encryption';

export type { KeyEncryption } from '../../server-lib/key-encryption';

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

