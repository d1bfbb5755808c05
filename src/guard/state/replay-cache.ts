import crypto from 'node:crypto';
import type { AppContext } from '../../context';

/**
 * Single-use identifiers across replicas (RFC 9449 §11.1 DPoP jti, RFC 7523 §3 assertion jti).
 * `consumeOnce` answers true exactly once per (namespace, key) until `expiresAt`, atomically:
 * Redis `SET NX PXAT` when ctx.redis is set, else `INSERT … ON CONFLICT` in PostgreSQL/PGlite
 * (a find-then-save would let two concurrent requests both pass).
 */
export async function consumeOnce(ctx: AppContext, namespace: string, rawKey: string, expiresAt: Date): Promise<boolean> {
  // Hashed: bounded length, and no client-chosen bytes (NUL) ever reach the store.
  const key = crypto.createHash('sha256').update(rawKey).digest('base64url');
  if (ctx.redis) {
    const ok = await ctx.redis.call('SET', `guard:seen:${namespace}:${key}`, '1', 'PXAT', String(Math.max(expiresAt.getTime(), Date.now() + 1000)), 'NX');
    return ok === 'OK';
  }
  const now = ctx.now();
  const r = await ctx.db.query(
    `INSERT INTO guard_seen (namespace, key, expires_at) VALUES ($1, $2, $3)
     ON CONFLICT (namespace, key) DO UPDATE SET expires_at = EXCLUDED.expires_at
       WHERE guard_seen.expires_at <= $4
     RETURNING 1 AS inserted`,
    [namespace, key, expiresAt, now],
  );
  if (Math.random() < 0.01) {
    await ctx.db.query('DELETE FROM guard_seen WHERE expires_at <= $1', [now]);
  }
  return r.rows.length === 1;
}
