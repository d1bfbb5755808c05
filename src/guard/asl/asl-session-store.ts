import type { Db } from '../../store';

export type AslSessionState = 'handshaking' | 'established';

/** Takes a handshake in progress (single use: the row is gone for every later caller); its sealed state, or undefined. */
export async function takeAslHandshake(db: Db, cid: string, now: Date): Promise<string | undefined> {
  const r = await db.query<{ sealed: string }>("DELETE FROM asl_session WHERE cid = $1 AND state = 'handshaking' AND expires_at > $2 RETURNING sealed", [cid, now]);
  return r.rows[0]?.sealed;
}

/**
 * Reserves the next `block` response numbers of an established, unexpired session in one
 * statement (replicas never share a number): its sealed keys, the last number reserved and its
 * expiry, or undefined.
 */
export async function reserveAslResponseNumbers(db: Db, cid: string, now: Date, block: bigint): Promise<{ sealed: string; encCtr: bigint; expiresAt: Date } | undefined> {
  const r = await db.query<{ sealed: string; enc_ctr: string; expires_at: Date }>(
    "UPDATE asl_session SET enc_ctr = enc_ctr + $3 WHERE cid = $1 AND state = 'established' AND expires_at > $2 RETURNING sealed, enc_ctr, expires_at",
    [cid, now, block.toString()],
  );
  const row = r.rows[0];
  return row ? { sealed: row.sealed, encCtr: BigInt(row.enc_ctr), expiresAt: new Date(row.expires_at) } : undefined;
}

/** Removes the sessions expired before `now`. */
export async function purgeAslSessions(db: Db, now: Date): Promise<void> {
  await db.query('DELETE FROM asl_session WHERE expires_at < $1', [now]);
}

/** Stores a session's state (an established session replaces its handshake, its response numbers start again at 0). */
export async function saveAslSession(db: Db, cid: string, state: AslSessionState, sealed: string, createdAt: Date, expiresAt: Date): Promise<void> {
  await db.query(
    `INSERT INTO asl_session (cid, state, sealed, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (cid) DO UPDATE SET state = EXCLUDED.state, sealed = EXCLUDED.sealed, enc_ctr = 0, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at`,
    [cid, state, sealed, createdAt, expiresAt],
  );
}
