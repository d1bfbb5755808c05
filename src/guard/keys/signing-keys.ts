import crypto from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose';
import type { AppContext } from '../../context';
import type { GuardSettings } from '../settings';
import { keyEncryptionFor, type KeyEncryption } from './key-encryption';
import { insertSigningKey, newestSigningKey, publishedSigningKeys, type SigningKeyRow as KeyRow } from './signing-key-store';

export interface SigningKey {
  kid: string;
  privateKey: crypto.KeyObject;
}

/** How long this process trusts its last read of the published keys when checking its own tokens. */
const PUBLISHED_CACHE_MS = 10_000;

type Jwks = { keys: JWK[] };

/**
 * The AS's ES256 signing keys: generated on first use, private part sealed in the
 * store, public part published at jwks_uri. A key signs for `signingKeyRotationSec`, then a new
 * one is made; retired keys stay published until every token they signed has expired.
 */
export class SigningKeys {
  private current?: { key: SigningKey; retireAt: number };
  private published?: { jwks: Jwks; at: number };
  private reading?: Promise<Jwks>;
  private nextRead?: Promise<Jwks>;
  private readonly kek: KeyEncryption;

  constructor(
    private readonly ctx: AppContext,
    private readonly settings: GuardSettings,
  ) {
    this.kek = keyEncryptionFor(ctx);
  }

  /**
   * The key to sign with now: the newest unretired key this process can open, shared by every
   * process with the same key-encryption key (replicas, `terminus workload-token`); a new one only
   * when there is none.
   */
  async signingKey(): Promise<SigningKey> {
    const now = this.ctx.now();
    if (this.current && this.current.retireAt > now.getTime()) return this.current.key;
    const row = (await newestSigningKey(this.ctx.db, this.kek.id, now)) ?? (await this.generate(now));
    const privateKey = crypto.createPrivateKey({ key: this.kek.open(row.private_enc), format: 'der', type: 'pkcs8' });
    const fresh = this.current?.key.kid !== row.kid;
    this.current = { key: { kid: row.kid, privateKey }, retireAt: new Date(row.retire_at).getTime() };
    if (fresh) this.published = undefined;
    return this.current.key;
  }

  /**
   * Every key whose tokens may still be valid (jwks_uri), as the store holds them now: a key that
   * another replica or process added (a rotation, `terminus workload-token`) is published at once,
   * before a token it signed can reach a verifier. Callers that arrive while a read is under way
   * share the next one, so a burst costs one query at a time and nobody gets a set read before
   * they asked.
   */
  jwks(): Promise<Jwks> {
    if (!this.reading) {
      const reading = this.read().finally(() => {
        if (this.reading === reading) this.reading = undefined;
      });
      this.reading = reading;
      return reading;
    }
    const settled = () => {
      this.nextRead = undefined;
      return this.jwks();
    };
    this.nextRead ??= this.reading.then(settled, settled);
    return this.nextRead;
  }

  /**
   * The published public key with this kid (the enforcement point checking this guard's own
   * tokens): the last read serves for a few seconds, and a kid not in it reads the store again.
   */
  async publicKey(kid: string): Promise<JWK | undefined> {
    const find = (j: Jwks) => j.keys.find((k) => k.kid === kid);
    const last = this.published;
    const hit = last && this.ctx.now().getTime() - last.at < PUBLISHED_CACHE_MS ? find(last.jwks) : undefined;
    return hit ?? find(await this.jwks());
  }

  private async read(): Promise<Jwks> {
    // A key exists from the first request on, so clients and the PEP can fetch it before any token.
    await this.signingKey();
    const now = this.ctx.now();
    const jwks = { keys: (await publishedSigningKeys(this.ctx.db, now)).map((row) => ({ ...row.public_jwk, kid: row.kid, use: 'sig', alg: 'ES256' })) };
    this.published = { jwks, at: now.getTime() };
    return jwks;
  }

  private async generate(now: Date): Promise<KeyRow> {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const publicJwk = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(publicJwk);
    const retireAt = new Date(now.getTime() + this.settings.signingKeyRotationSec * 1000);
    // Published until the last token it signed has expired (AT and RT lifetimes are capped by the policy).
    const unpublishAt = new Date(retireAt.getTime() + this.settings.refreshTokenTtlSec * 1000);
    const row: KeyRow = {
      kid,
      public_jwk: publicJwk,
      private_enc: this.kek.seal(privateKey.export({ format: 'der', type: 'pkcs8' })),
      kek_id: this.kek.id,
      retire_at: retireAt,
      unpublish_at: unpublishAt,
    };
    await insertSigningKey(this.ctx.db, row, now);
    this.ctx.logger.info({ kid }, 'guard: generated a new signing key');
    return row;
  }
}
