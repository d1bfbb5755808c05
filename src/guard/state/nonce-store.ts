import crypto from 'node:crypto';
import type { AppContext } from '../../context';

export interface IssuedNonce {
  nonce: string;
  expiresIn: number;
}

/** 128 random bits, base64url (seed 000 2.2; gemSpec A_28144). */
export function newNonceValue(): string {
  return crypto.randomBytes(16).toString('base64url');
}

/** Stores a fresh nonce that `consumeNonce` accepts once, on any replica, for `ttlSec` seconds. */
export async function issueNonce(ctx: AppContext, ttlSec: number): Promise<IssuedNonce> {
  const nonce = newNonceValue();
  const expiresAt = ctx.now().getTime() + ttlSec * 1000;
  if (ctx.redis) {
    await ctx.redis.call('SET', `guard:nonce:${nonce}`, String(expiresAt), 'PXAT', String(Math.max(expiresAt, Date.now()) + 1000));
  } else {
    await ctx.db.query('INSERT INTO guard_nonce (nonce, expires_at) VALUES ($1, $2)', [nonce, new Date(expiresAt)]);
    if (Math.random() < 0.01) await ctx.db.query('DELETE FROM guard_nonce WHERE expires_at <= $1', [ctx.now()]);
  }
  return { nonce, expiresIn: ttlSec };
}

/** Atomically removes the nonce; true when it existed and had not expired (seed 000 section 3: single use). */
export async function consumeNonce(ctx: AppContext, nonce: string): Promise<boolean> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(nonce)) return false;
  const now = ctx.now().getTime();
  if (ctx.redis) {
    const v = await ctx.redis.call('GETDEL', `guard:nonce:${nonce}`);
    return typeof v === 'string' && Number(v) > now;
  }
  const r = await ctx.db.query<{ expires_at: Date }>('DELETE FROM guard_nonce WHERE nonce = $1 RETURNING expires_at', [nonce]);
  const row = r.rows[0];
  return row !== undefined && new Date(row.expires_at).getTime() > now;
}
