import type { Db } from '../../store';

/** A row of asl_server_key: a signed set of the server's static ASL keys, private halves sealed with the key-encryption key. */
export interface AslServerKeyRow {
  id: string;
  signed_pub_keys: Buffer;
  signature: Buffer;
  cert_hash: Buffer;
  cdv: number;
  private_keys: string;
  cert_data: Buffer;
  rotate_at: Date;
  expires_at: Date;
}

/** The newest set sealed with this key-encryption key that is not yet due for rotation. */
export async function newestAslServerKey(db: Db, kekId: string, now: Date): Promise<AslServerKeyRow | undefined> {
  const r = await db.query<AslServerKeyRow>('SELECT * FROM asl_server_key WHERE kek_id = $1 AND rotate_at > $2 ORDER BY created_at DESC LIMIT 1', [kekId, now]);
  return r.rows[0];
}

/** A living set by id. */
export async function aslServerKeyById(db: Db, id: string, kekId: string, now: Date): Promise<AslServerKeyRow | undefined> {
  const r = await db.query<AslServerKeyRow>('SELECT * FROM asl_server_key WHERE id = $1 AND kek_id = $2 AND expires_at > $3', [id, kekId, now]);
  return r.rows[0];
}

/** The CertData of the newest living set signed under this certificate hash and data version. */
export async function aslCertData(db: Db, certHash: Buffer, cdv: number, now: Date): Promise<Buffer | undefined> {
  const r = await db.query<{ cert_data: Buffer }>('SELECT cert_data FROM asl_server_key WHERE cert_hash = $1 AND cdv = $2 AND expires_at > $3 ORDER BY created_at DESC LIMIT 1', [certHash, cdv, now]);
  return r.rows[0] ? Buffer.from(r.rows[0].cert_data) : undefined;
}

/** Stores a new set (an id already stored is kept: the id is the hash of the signed keys). */
export async function insertAslServerKey(db: Db, row: AslServerKeyRow, kekId: string, createdAt: Date): Promise<void> {
  await db.query(
    `INSERT INTO asl_server_key (id, signed_pub_keys, signature, cert_hash, cdv, private_keys, kek_id, cert_data, created_at, rotate_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
    [row.id, row.signed_pub_keys, row.signature, row.cert_hash, row.cdv, row.private_keys, kekId, row.cert_data, createdAt, row.rotate_at, row.expires_at],
  );
}
