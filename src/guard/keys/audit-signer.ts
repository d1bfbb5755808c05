import crypto from 'node:crypto';
import { calculateJwkThumbprint, CompactSign, compactVerify, decodeProtectedHeader, exportJWK } from 'jose';
import type { AppContext } from '../../context';
import type { AuditSigner } from '../../server-lib/audit-port';
import { guardSettings } from '../settings';
import { keyEncryptionFor } from './key-encryption';
import { signingKeyByKid } from './signing-key-store';
import { SigningKeys } from './signing-keys';

/** The media type of an audit checkpoint's JWS (RFC 7515 §4.1.9). */
const CHECKPOINT_TYP = 'terminus-audit-checkpoint+jws';

/** A checkpoint signed by a key this process cannot open: the key-encryption key is not the one the server ran with. */
export class CheckpointKeyUnavailable extends Error {}

/**
 * Signs the audit trail's checkpoints with the guard's current ES256 key, and checks them against
 * the key the `kid` names, opened with the key-encryption key: the public key is derived from the
 * sealed private key, so a key row put into the store by someone without the key-encryption key
 * cannot vouch for a forged checkpoint.
 */
export function auditSigner(ctx: AppContext): AuditSigner {
  const keys = new SigningKeys(ctx, guardSettings(ctx.config));
  const kek = keyEncryptionFor(ctx);
  const opened = new Map<string, crypto.KeyObject>();
  return {
    async ready() {
      await keys.signingKey();
    },
    async sign(payload) {
      const key = await keys.signingKey();
      return new CompactSign(Buffer.from(JSON.stringify(payload), 'utf8')).setProtectedHeader({ alg: 'ES256', typ: CHECKPOINT_TYP, kid: key.kid }).sign(key.privateKey);
    },
    async verify(jws) {
      const { kid, alg, typ } = decodeProtectedHeader(jws);
      if (alg !== 'ES256' || typ !== CHECKPOINT_TYP || typeof kid !== 'string') throw new Error('not a checkpoint JWS of this server (alg, typ or kid)');
      let publicKey = opened.get(kid);
      if (!publicKey) {
        const row = await signingKeyByKid(ctx.db, kid);
        if (!row) throw new Error(`no guard key ${kid}`);
        if (row.kek_id !== kek.id) throw new CheckpointKeyUnavailable(`the guard key ${kid} is sealed with another key-encryption key (GUARD_KEY_SECRET or DATA_DIR of the server)`);
        publicKey = crypto.createPublicKey(crypto.createPrivateKey({ key: kek.open(row.private_enc), format: 'der', type: 'pkcs8' }));
        if ((await calculateJwkThumbprint(await exportJWK(publicKey))) !== kid) throw new Error(`the guard key ${kid} does not open to the key its kid names`);
        opened.set(kid, publicKey);
      }
      const { payload } = await compactVerify(jws, publicKey);
      return JSON.parse(Buffer.from(payload).toString('utf8')) as Record<string, unknown>;
    },
  };
}
