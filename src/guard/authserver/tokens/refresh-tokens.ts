import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { PolicyInput, WorkloadPolicyInput } from '../../policy';
import type { RevokedSessions } from '../../state/revoked-sessions';
import type { SessionClaims } from './access-token';
import { recordAttestationSql } from '../clients/client-store';

/** A refresh-token family: one session of one client with one DPoP key. */
export interface Session {
  sid: string;
  clientId: string;
  jkt: string;
  claims: SessionClaims;
  /** A workload's session (docs/requirements.md, Workload token exchange) has no refresh token: its input is never refreshed. */
  policyInput: PolicyInput | WorkloadPolicyInput;
  createdAt: Date;
  expiresAt: Date;
  revokedAt?: Date;
  /** A workload's session (docs/requirements.md, Workload token exchange): `clientId` names the workload, not a registered client. */
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

export function refreshTokenHash(token: string): string {
  return crypto.createHash('sha256').update(token).digest('base64url');
}

const INSERT_SESSION = `INSERT INTO guard_session (sid, client_id, jkt, claims, policy_input, created_at, expires_at, workload, registered_client_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $8 THEN NULL ELSE $2 END)`;

function sessionParams(s: Session): unknown[] {
  return [s.sid, s.clientId, s.jkt, JSON.stringify(s.claims), JSON.stringify(s.policyInput), s.createdAt, s.expiresAt, s.workload === true];
}

/** A session without refresh tokens (a workload's, docs/requirements.md, Workload token exchange). */
export async function createSession(ctx: AppContext, s: Session): Promise<void> {
  await ctx.db.query(INSERT_SESSION, sessionParams(s));
}

/** A refresh token about to be stored: the value for the client, what the table keeps. */
export interface NewRefreshToken {
  token: string;
  hash: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** A new refresh token of the session; it expires at the earlier of its TTL and the family cap. */
function newRefreshToken(ctx: AppContext, session: Session, ttlSec: number): NewRefreshToken {
  const issuedAt = ctx.now();
  const token = newRefreshTokenValue();
  return { token, hash: refreshTokenHash(token), issuedAt, expiresAt: new Date(Math.min(issuedAt.getTime() + ttlSec * 1000, session.expiresAt.getTime())) };
}

/**
 * A new refresh-token family: the session, its first refresh token and, after an attestation, the
 * client's attested state (`attested`, client-store.ts) in one statement, so one commit.
 */
export async function createSessionWithToken(ctx: AppContext, s: Session, ttlSec: number, attestedPlatform?: string): Promise<NewRefreshToken> {
  const rt = newRefreshToken(ctx, s, ttlSec);
  // $1-$8 the session ($2 its client), $9-$11 the refresh token ($10 now), $12 the platform.
  const ctes = [`session AS (${INSERT_SESSION} RETURNING sid)`];
  if (attestedPlatform !== undefined) ctes.push(`client AS (${recordAttestationSql('$2', '$12', '$10')})`);
  await ctx.db.query(
    `WITH ${ctes.join(', ')}
     INSERT INTO guard_refresh_token (token_hash, sid, issued_at, expires_at) SELECT $9, sid, $10, $11 FROM session`,
    [...sessionParams(s), rt.hash, rt.issuedAt, rt.expiresAt, ...(attestedPlatform !== undefined ? [attestedPlatform] : [])],
    { prepare: true },
  );
  return rt;
}

/**
 * Rotation (RFC 9700 §4.14.2): the presented token is marked used and its successor stored, in one
 * statement. Undefined when the presented token was used meanwhile (a racing refresh won): exactly
 * one of two racing refreshes gets a successor (`UPDATE … WHERE consumed_at IS NULL`).
 */
export async function rotateRefreshToken(ctx: AppContext, presentedHash: string, session: Session, ttlSec: number): Promise<NewRefreshToken | undefined> {
  const rt = newRefreshToken(ctx, session, ttlSec);
  // The family must still be alive too: a refresh that read it before a revocation committed (or
  // knew it from RefreshFamilies) gets no successor.
  const r = await ctx.db.query(
    `WITH used AS (
       UPDATE guard_refresh_token t SET consumed_at = $3
        WHERE t.token_hash = $1 AND t.consumed_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM guard_session s WHERE s.sid = t.sid AND s.revoked_at IS NOT NULL)
       RETURNING t.sid)
     INSERT INTO guard_refresh_token (token_hash, sid, issued_at, expires_at) SELECT $2, sid, $3, $4 FROM used RETURNING sid`,
    [presentedHash, rt.hash, rt.issuedAt, rt.expiresAt],
    { prepare: true },
  );
  return r.rows.length === 1 ? rt : undefined;
}

/**
 * The families of the refresh tokens this process issued, by token hash, so a refresh needs no
 * read: a session's client, key, claims, policy input and lifetime never change, and what does
 * (use, revocation) the rotation statement checks in the store. A token used here is taken out;
 * one issued by another replica is read from the store. Bounded; a full cache starts over.
 */
export class RefreshFamilies {
  private readonly issued = new Map<string, RefreshTokenRecord>();
  constructor(private readonly size = 50_000) {}

  remember(session: Session, rt: NewRefreshToken): void {
    if (this.issued.size >= this.size) this.issued.clear();
    this.issued.set(rt.hash, { tokenHash: rt.hash, session, issuedAt: rt.issuedAt, expiresAt: rt.expiresAt });
  }

  /** The record of an unused token issued here, removed (each token is presented once). */
  take(tokenHash: string): RefreshTokenRecord | undefined {
    const rt = this.issued.get(tokenHash);
    if (rt) this.issued.delete(tokenHash);
    return rt;
  }
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
