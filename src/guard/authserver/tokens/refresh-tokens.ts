import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { RevokedSessions } from '../../state/revoked-sessions';
import {
  insertSession,
  insertSessionWithToken,
  markSessionRevoked,
  refreshTokenByHash,
  rotateStoredToken,
  sessionClient,
  type RefreshTokenRecord,
  type Session,
} from './refresh-token-store';

export type { RefreshTokenRecord, Session } from './refresh-token-store';

/** Opaque 256-bit token; only its SHA-256 is stored. */
function newRefreshTokenValue(): string {
  return crypto.randomBytes(32).toString('base64url');
}

export function refreshTokenHash(token: string): string {
  return crypto.createHash('sha256').update(token).digest('base64url');
}

/** A session without refresh tokens (a workload's, docs/requirements.md, Workload token exchange). */
export async function createSession(ctx: AppContext, s: Session): Promise<void> {
  await insertSession(ctx.db, s);
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
  await insertSessionWithToken(ctx.db, s, rt, attestedPlatform);
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
  return (await rotateStoredToken(ctx.db, presentedHash, rt)) ? rt : undefined;
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

export async function findRefreshToken(ctx: AppContext, token: string): Promise<RefreshTokenRecord | undefined> {
  return refreshTokenByHash(ctx.db, refreshTokenHash(token));
}

/** Kills the whole family: every refresh token of the session, present and future, and its access tokens (the PEP checks `sid`). */
export async function revokeSession(ctx: AppContext, sessions: RevokedSessions, sid: string, why: string): Promise<void> {
  await markSessionRevoked(ctx.db, sid, ctx.now(), why);
  sessions.noteRevoked(sid);
}

export async function findSession(ctx: AppContext, sid: string): Promise<{ clientId: string; jkt: string } | undefined> {
  return sessionClient(ctx.db, sid);
}
