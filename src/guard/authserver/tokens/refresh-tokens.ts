import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { PolicyInput, WorkloadPolicyInput } from '../../policy';
import type { RevokedSessions } from '../../state/revoked-sessions';
import type { SessionClaims } from './access-token';

/** A refresh-token family: one session of one client with one DPoP key. */
export interface Session {
  sid: string;
  clientId: string;
  jkt: string;
  claims: SessionClaims;
  /** A workload's session (CONTRACT 11) has no refresh token: its input is never refreshed. */
  policyInput: PolicyInput | WorkloadPolicyInput;
  createdAt: Date;
  expiresAt: Date;
  revokedAt?: Date;
  /** A workload's session (CONTRACT 11): `clientId` names the workload, not a registered client. */
  workload?: boolean;
}

export interface RefreshTokenRecord {
  tokenHash: string;
  session: Session;
  issuedAt: Date;
  expiresAt: Date;
  consumedAt?: Date;
}

/** Opaque 256-bit token; only its SHA-256 is stored. */
function newRefreshTokenValue(): string {
  return crypto.randomBytes(32).toString('base64url');
}

function refreshTokenHash(token: string): string {
  return crypto.createHash('sha256').update(token).digest('base64url');
}

export async function createSession(ctx: AppContext, s: Session): Promise<void> {
  await ctx.db.query(
    `INSERT INTO guard_session (sid, client_id, jkt, claims, policy_input, created_at, expires_at, workload, registered_client_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $8 THEN NULL ELSE $2 END)`,
    [s.sid, s.clientId, s.jkt, JSON.stringify(s.claims), JSON.stringify(s.policyInput), s.createdAt, s.expiresAt, s.workload === true],
  );
}

/** Stores a new refresh token of the session; it expires at the earlier of its TTL and the family cap. */
export async function issueRefreshToken(ctx: AppContext, session: Session, ttlSec: number): Promise<{ token: string; expiresAt: Date }> {
  const now = ctx.now();
  const token = newRefreshTokenValue();
  const expiresAt = new Date(Math.min(now.getTime() + ttlSec * 1000, session.expiresAt.getTime()));
  await ctx.db.query('INSERT INTO guard_refresh_token (token_hash, sid, issued_at, expires_at) VALUES ($1, $2, $3, $4)', [
    refreshTokenHash(token),
    session.sid,
    now,
    expiresAt,
  ]);
  return { token, expiresAt };
}

interface Row {
  token_hash: string;
  issued_at: Date;
  expires_at: Date;
  consumed_at: Date | null;
  sid: string;
  client_id: string;
  jkt: string;
  claims: SessionClaims;
  policy_input: PolicyInput;
  created_at: Date;
  session_expires_at: Date;
  revoked_at: Date | null;
}

export async function findRefreshToken(ctx: AppContext, token: string): Promise<RefreshTokenRecord | undefined> {
  const r = await ctx.db.query<Row>(
    `SELECT t.token_hash, t.issued_at, t.expires_at, t.consumed_at, s.sid, s.client_id, s.jkt, s.claims, s.policy_input,
            s.created_at, s.expires_at AS session_expires_at, s.revoked_at
       FROM guard_refresh_token t JOIN guard_session s ON s.sid = t.sid WHERE t.token_hash = $1`,
    [refreshTokenHash(token)],
  );
  const row = r.rows[0];
  if (!row) return undefined;
  return {
    tokenHash: row.token_hash,
    issuedAt: new Date(row.issued_at),
    expiresAt: new Date(row.expires_at),
    consumedAt: row.consumed_at ? new Date(row.consumed_at) : undefined,
    session: {
      sid: row.sid,
      clientId: row.client_id,
      jkt: row.jkt,
      claims: row.claims,
      policyInput: row.policy_input,
      createdAt: new Date(row.created_at),
      expiresAt: new Date(row.session_expires_at),
      revokedAt: row.revoked_at ? new Date(row.revoked_at) : undefined,
    },
  };
}

/**
 * Marks the token used; true for exactly one caller even when refreshes race
 * (`UPDATE … WHERE consumed_at IS NULL RETURNING`).
 */
export async function consumeRefreshToken(ctx: AppContext, tokenHash: string): Promise<boolean> {
  const r = await ctx.db.query('UPDATE guard_refresh_token SET consumed_at = $2 WHERE token_hash = $1 AND consumed_at IS NULL RETURNING 1 AS ok', [
    tokenHash,
    ctx.now(),
  ]);
  return r.rows.length === 1;
}

/** Kills the whole family: every refresh token of the session, present and future, and its access tokens (the PEP checks `sid`). */
export async function revokeSession(ctx: AppContext, sessions: RevokedSessions, sid: string, why: string): Promise<void> {
  await ctx.db.query('UPDATE guard_session SET revoked_at = COALESCE(revoked_at, $2), revoked_why = COALESCE(revoked_why, $3) WHERE sid = $1', [
    sid,
    ctx.now(),
    why,
  ]);
  sessions.noteRevoked(sid);
}

export async function findSession(ctx: AppContext, sid: string): Promise<{ clientId: string; jkt: string } | undefined> {
  const r = await ctx.db.query<{ client_id: string; jkt: string }>('SELECT client_id, jkt FROM guard_session WHERE sid = $1', [sid]);
  return r.rows[0] ? { clientId: r.rows[0].client_id, jkt: r.rows[0].jkt } : undefined;
}
