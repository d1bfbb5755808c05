import type { Db } from '../../../store';

/** The steps of a patient's login that hand out a single-use handle (migration 104). */
export type AuthorizationKind = 'request_uri' | 'login' | 'code';

/** Removes the rows expired before `before`. */
export async function purgeAuthorizations(db: Db, before: Date): Promise<void> {
  await db.query('DELETE FROM guard_authorization WHERE expires_at < $1', [before]);
}

export async function insertAuthorization(db: Db, handleHash: string, kind: AuthorizationKind, clientId: string, data: unknown, createdAt: Date, expiresAt: Date): Promise<void> {
  await db.query('INSERT INTO guard_authorization (handle_hash, kind, client_id, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)', [
    handleHash,
    kind,
    clientId,
    JSON.stringify(data),
    createdAt,
    expiresAt,
  ]);
}

/** Marks an unused, unexpired row used in one statement (exactly one caller gets it); its data, or undefined. */
export async function markAuthorizationUsed<T>(db: Db, handleHash: string, kind: AuthorizationKind, now: Date): Promise<{ data: T; clientId: string } | undefined> {
  const r = await db.query<{ data: T; client_id: string }>(
    'UPDATE guard_authorization SET used_at = $3 WHERE handle_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 RETURNING data, client_id',
    [handleHash, kind, now],
  );
  return r.rows[0] ? { data: r.rows[0].data, clientId: r.rows[0].client_id } : undefined;
}

/** Marks a used row reused (the first time is kept); its data and the session its first redemption recorded, or undefined. */
export async function markAuthorizationReused<T>(db: Db, handleHash: string, kind: AuthorizationKind, now: Date): Promise<{ data: T; clientId: string; sid: string | null } | undefined> {
  const r = await db.query<{ data: T; client_id: string; sid: string | null }>(
    'UPDATE guard_authorization SET reused_at = COALESCE(reused_at, $3) WHERE handle_hash = $1 AND kind = $2 AND used_at IS NOT NULL RETURNING data, client_id, sid',
    [handleHash, kind, now],
  );
  const row = r.rows[0];
  return row ? { data: row.data, clientId: row.client_id, sid: row.sid } : undefined;
}

/** Records the session on the row; when the row was marked reused (null: not reused, undefined: no row). */
export async function setAuthorizationSession(db: Db, handleHash: string, kind: AuthorizationKind, sid: string): Promise<Date | null | undefined> {
  const r = await db.query<{ reused_at: Date | null }>('UPDATE guard_authorization SET sid = $3 WHERE handle_hash = $1 AND kind = $2 RETURNING reused_at', [handleHash, kind, sid]);
  return r.rows[0]?.reused_at;
}
