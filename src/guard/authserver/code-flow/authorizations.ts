import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import { type AuthorizationKind, insertAuthorization, markAuthorizationReused, markAuthorizationUsed, purgeAuthorizations, setAuthorizationSession } from './authorization-store';

export type { AuthorizationKind } from './authorization-store';

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
  await purgeAuthorizations(ctx.db, new Date(now.getTime() - 3600_000));
  await insertAuthorization(ctx.db, hash(handle), kind, clientId, data, now, new Date(now.getTime() + ttlSec * 1000));
}

/**
 * Redeems a handle once: exactly one caller gets it unused (`UPDATE … WHERE used_at IS NULL`),
 * a later one gets it with `reused`. Unknown, of another kind or expired: undefined.
 */
export async function redeemAuthorization<T>(ctx: AppContext, kind: AuthorizationKind, handle: string): Promise<Redeemed<T> | undefined> {
  const now = ctx.now();
  const first = await markAuthorizationUsed<T>(ctx.db, hash(handle), kind, now);
  if (first) return first;
  const row = await markAuthorizationReused<T>(ctx.db, hash(handle), kind, now);
  if (!row) return undefined;
  return { data: row.data, clientId: row.clientId, reused: { sid: row.sid ?? undefined } };
}

/**
 * Records the session a redeemed code started (what a second redemption revokes). False when a
 * second redemption came in the meantime: the caller revokes the session itself.
 */
export async function recordSession(ctx: AppContext, kind: AuthorizationKind, handle: string, sid: string): Promise<boolean> {
  return (await setAuthorizationSession(ctx.db, hash(handle), kind, sid)) === null;
}
