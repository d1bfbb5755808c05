import type { Db } from '../../../store';
import type { PolicyInput, WorkloadPolicyInput } from '../../policy';
import { recordAttestationSql } from '../clients/client-store';
import type { SessionClaims } from './access-token';

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

/** What guard_refresh_token keeps of a token: its hash and lifetime. */
export interface StoredRefreshToken {
  hash: string;
  issuedAt: Date;
  expiresAt: Date;
}

const INSERT_SESSION = `INSERT INTO guard_session (sid, client_id, jkt, claims, policy_input, created_at, expires_at, workload, registered_client_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $8 THEN NULL ELSE $2 END)`;

function sessionParams(s: Session): unknown[] {
  return [s.sid, s.clientId, s.jkt, JSON.stringify(s.claims), JSON.stringify(s.policyInput), s.createdAt, s.expiresAt, s.workload === true];
}

export async function insertSession(db: Db, s: Session): Promise<void> {
  await db.query(INSERT_SESSION, sessionParams(s));
}

/** The session, its first refresh token and, with a platform, the client's attested state (client-store.ts) in one statement. */
export async function insertSessionWithToken(db: Db, s: Session, rt: StoredRefreshToken, attestedPlatform?: string): Promise<void> {
  // $1-$8 the session ($2 its client), $9-$11 the refresh token ($10 now), $12 the platform.
  const ctes = [`session AS (${INSERT_SESSION} RETURNING sid)`];
  if (attestedPlatform !== undefined) ctes.push(`client AS (${recordAttestationSql('$2', '$12', '$10')})`);
  await db.query(
    `WITH ${ctes.join(', ')}
     INSERT INTO guard_refresh_token (token_hash, sid, issued_at, expires_at) SELECT $9, sid, $10, $11 FROM session`,
    [...sessionParams(s), rt.hash, rt.issuedAt, rt.expiresAt, ...(attestedPlatform !== undefined ? [attestedPlatform] : [])],
    { prepare: true },
  );
}

/**
 * Marks the presented token used and stores its successor in one statement, only while the token
 * is unused and its family not revoked: whether this caller rotated it.
 */
export async function rotateStoredToken(db: Db, presentedHash: string, successor: StoredRefreshToken): Promise<boolean> {
  const r = await db.query(
    `WITH used AS (
       UPDATE guard_refresh_token t SET consumed_at = $3
        WHERE t.token_hash = $1 AND t.consumed_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM guard_session s WHERE s.sid = t.sid AND s.revoked_at IS NOT NULL)
       RETURNING t.sid)
     INSERT INTO guard_refresh_token (token_hash, sid, issued_at, expires_at) SELECT $2, sid, $3, $4 FROM used RETURNING sid`,
    [presentedHash, successor.hash, successor.issuedAt, successor.expiresAt],
    { prepare: true },
  );
  return r.rows.length === 1;
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

/** A refresh token by its hash, with its session. */
export async function refreshTokenByHash(db: Db, tokenHash: string): Promise<RefreshTokenRecord | undefined> {
  const r = await db.query<Row>(
    `SELECT t.token_hash, t.issued_at, t.expires_at, t.consumed_at, s.sid, s.client_id, s.jkt, s.claims, s.policy_input,
            s.created_at, s.expires_at AS session_expires_at, s.revoked_at
       FROM guard_refresh_token t JOIN guard_session s ON s.sid = t.sid WHERE t.token_hash = $1`,
    [tokenHash],
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

/** Marks the session revoked (the first time and reason are kept). */
export async function markSessionRevoked(db: Db, sid: string, now: Date, why: string): Promise<void> {
  await db.query('UPDATE guard_session SET revoked_at = COALESCE(revoked_at, $2), revoked_why = COALESCE(revoked_why, $3) WHERE sid = $1', [sid, now, why]);
}

/** The client and DPoP key of a session. */
export async function sessionClient(db: Db, sid: string): Promise<{ clientId: string; jkt: string } | undefined> {
  const r = await db.query<{ client_id: string; jkt: string }>('SELECT client_id, jkt FROM guard_session WHERE sid = $1', [sid]);
  return r.rows[0] ? { clientId: r.rows[0].client_id, jkt: r.rows[0].jkt } : undefined;
}
