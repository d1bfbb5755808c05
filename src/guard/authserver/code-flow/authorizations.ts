import crypto from 'node:crypto';
import type { AppContext } from '../../../context';

/** The steps of a patient's login that hand out a single-use handle (migration 104). */
export type AuthorizationKind = 'request_uri' | 'login' | 'code';

/** What POST /par was asked for; carried through every later step. */
export interface PushedRequest {
  clientId: string;
  redirectUri: string;
  /** The app's PKCE challenge (S256). */
  codeChallenge: string;
  scope: string[];
  /** The app's `state`, echoed to its redirect URI. */
  state: string;
  /** The upstream IdP the user logs in with. */
  idpIss: string;
  /** RFC 9449 §10: the app's DPoP key, when it named one at PAR. */
  dpopJkt?: string;
}

/** The upstream round trip: what the IdP's answer is checked against. */
export interface UpstreamLogin extends PushedRequest {
  nonce: string;
  codeVerifier: string;
}

/** Who logged in, as this guard's authorization code remembers it. */
export interface AuthorizedUser extends PushedRequest {
  /** The IdP subject and the insurance number (KVNR) it named. */
  user: { iss: string; sub: string; kvnr: string; name?: string };
}

export interface Redeemed<T> {
  data: T;
  clientId: string;
  /** Already redeemed once: the session its first redemption started (if any). */
  reused?: { sid?: string };
}

const hash = (handle: string) => crypto.createHash('sha256').update(handle).digest('base64url');

/** A fresh 256-bit handle (request_uri tail, upstream `state`, authorization code). */
export function newHandle(): string {
  return crypto.randomBytes(32).toString('base64url');
}

/** Stores a step under `handle` (only its hash is kept); expired rows are swept on the way. */
export async function saveAuthorization(ctx: AppContext, kind: AuthorizationKind, handle: string, clientId: string, data: unknown, ttlSec: number): Promise<void> {
  const now = ctx.now();
  // Reused codes stay a while after expiry so a late second redemption still revokes.
  await ctx.db.query('DELETE FROM guard_authorization WHERE expires_at < $1', [new Date(now.getTime() - 3600_000)]);
  await ctx.db.query(
    'INSERT INTO guard_authorization (handle_hash, kind, client_id, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [hash(handle), kind, clientId, JSON.stringify(data), now, new Date(now.getTime() + ttlSec * 1000)],
  );
}

/**
 * Redeems a handle once: exactly one caller gets it unused (`UPDATE … WHERE used_at IS NULL`),
 * a later one gets it with `reused`. Unknown, of another kind or expired: undefined.
 */
export async function redeemAuthorization<T>(ctx: AppContext, kind: AuthorizationKind, handle: string): Promise<Redeemed<T> | undefined> {
  const now = ctx.now();
  const first = await ctx.db.query<{ data: T; client_id: string }>(
    'UPDATE guard_authorization SET used_at = $3 WHERE handle_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 RETURNING data, client_id',
    [hash(handle), kind, now],
  );
  if (first.rows[0]) return { data: first.rows[0].data, clientId: first.rows[0].client_id };
  const seen = await ctx.db.query<{ data: T; client_id: string; sid: string | null }>(
    'UPDATE guard_authorization SET reused_at = COALESCE(reused_at, $3) WHERE handle_hash = $1 AND kind = $2 AND used_at IS NOT NULL RETURNING data, client_id, sid',
    [hash(handle), kind, now],
  );
  const row = seen.rows[0];
  if (!row) return undefined;
  return { data: row.data, clientId: row.client_id, reused: { sid: row.sid ?? undefined } };
}

/**
 * Records the session a redeemed code started (what a second redemption revokes). False when a
 * second redemption came in the meantime: the caller revokes the session itself.
 */
export async function recordSession(ctx: AppContext, kind: AuthorizationKind, handle: string, sid: string): Promise<boolean> {
  const r = await ctx.db.query<{ reused_at: Date | null }>('UPDATE guard_authorization SET sid = $3 WHERE handle_hash = $1 AND kind = $2 RETURNING reused_at', [hash(handle), kind, sid]);
  return r.rows[0]?.reused_at === null;
}
