import type { JWK } from 'jose';
import type { Db } from '../../store';

/** A row of guard_signing_key: the private key sealed with the key-encryption key `kek_id`. */
export interface SigningKeyRow {
  kid: string;
  public_jwk: JWK;
  private_enc: string;
  kek_id: string;
  retire_at: Date;
  unpublish_at: Date;
}

/** The newest key sealed with this key-encryption key that is not yet retired. */
export async function newestSigningKey(db: Db, kekId: string, now: Date): Promise<SigningKeyRow | undefined> {
  const r = await db.query<SigningKeyRow>('SELECT * FROM guard_signing_key WHERE kek_id = $1 AND retire_at > $2 ORDER BY created_at DESC LIMIT 1', [kekId, now]);
  return r.rows[0];
}

/** The public keys still published (newest first). */
export async function publishedSigningKeys(db: Db, now: Date): Promise<Pick<SigningKeyRow, 'kid' | 'public_jwk'>[]> {
  const r = await db.query<Pick<SigningKeyRow, 'kid' | 'public_jwk'>>('SELECT kid, public_jwk FROM guard_signing_key WHERE unpublish_at > $1 ORDER BY created_at DESC', [now]);
  return r.rows;
}

/** Stores a new key (a kid already stored is kept: the thumbprint names the same key). */
export async function insertSigningKey(db: Db, row: SigningKeyRow, createdAt: Date): Promise<void> {
  await db.query(
    `INSERT INTO guard_signing_key (kid, public_jwk, private_enc, kek_id, created_at, retire_at, unpublish_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kid) DO NOTHING`,
    [row.kid, JSON.stringify(row.public_jwk), row.private_enc, row.kek_id, createdAt, row.retire_at, row.unpublish_at],
  );
}

/** One key by its kid, published or not (an audit checkpoint it signed is checked years later). */
export async function signingKeyByKid(db: Db, kid: string): Promise<SigningKeyRow | undefined> {
  const r = await db.query<SigningKeyRow>('SELECT * FROM guard_signing_key WHERE kid = $1', [kid]);
  return r.rows[0];
}
