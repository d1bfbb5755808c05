import type { Db } from '../../store';

/** The session's revocation mark (guard_session.revoked_at): true or false, or undefined for a sid this store never issued (or one expired and purged). */
export async function sessionRevoked(db: Db, sid: string): Promise<boolean | undefined> {
  const r = await db.query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM guard_session WHERE sid = $1', [sid]);
  return r.rows.length === 1 ? r.rows[0].revoked : undefined;
}
