import type { Db } from '../../store';
import { sessionRevoked } from './revoked-sessions-store';

/**
 * Is the session (refresh-token family, the access token's `sid`) still alive? /revoke and reuse
 * detection set guard_session.revoked_at (the reuse branch also kills the family's
 * access tokens); the enforcement point asks here on every request.
 *
 * Cost: one primary-key lookup per sid and second at most. A live answer is believed for
 * `liveForMs` (1 s), so another replica's revocation takes effect within that; a revocation made
 * by this application is seen at once (`noteRevoked`); a revoked or unknown sid stays refused.
 * Concurrent requests of one sid share one lookup. One instance per application (app.ts), shared
 * by its authorization server and its enforcement point.
 */
export interface SessionLiveness {
  isLive(sid: string): Promise<boolean>;
}

/** Positive answers are cached at most this long: the bound on a revocation's delay across replicas. */
export const LIVE_SESSION_CACHE_MS = 1_000;
const MAX_ENTRIES = 50_000;

/** Monotonic: the cache must not depend on the (test-movable) protocol clock. */
const monotonicMs = () => performance.now();

export class RevokedSessions implements SessionLiveness {
  private readonly liveUntil = new Map<string, number>();
  private readonly dead = new Set<string>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(
    private readonly db: Db,
    private readonly liveForMs = LIVE_SESSION_CACHE_MS,
  ) {}

  /** Called by the authorization server right after it revokes a session. */
  noteRevoked(sid: string): void {
    this.liveUntil.delete(sid);
    remember(this.dead, sid);
  }

  async isLive(sid: string): Promise<boolean> {
    if (this.dead.has(sid)) return false;
    const until = this.liveUntil.get(sid);
    if (until !== undefined && until > monotonicMs()) return true;
    let lookup = this.pending.get(sid);
    if (!lookup) {
      lookup = this.lookup(sid).finally(() => this.pending.delete(sid));
      this.pending.set(sid, lookup);
    }
    return lookup;
  }

  private async lookup(sid: string): Promise<boolean> {
    const asked = monotonicMs();
    // No row: a session this store never issued (or one long expired and purged).
    const live = (await sessionRevoked(this.db, sid)) === false;
    if (!live) {
      remember(this.dead, sid);
      this.liveUntil.delete(sid);
    } else if (!this.dead.has(sid)) {
      if (this.liveUntil.size >= MAX_ENTRIES) this.liveUntil.clear();
      // Counted from when the question was asked: a revocation committed meanwhile is seen within liveForMs.
      this.liveUntil.set(sid, asked + this.liveForMs);
    }
    return live && !this.dead.has(sid);
  }
}

function remember(set: Set<string>, sid: string): void {
  // Access tokens live minutes: the oldest revoked sids can go once the set is large.
  if (set.size >= MAX_ENTRIES) {
    const oldest = set.values().next().value;
    if (oldest !== undefined) set.delete(oldest);
  }
  set.add(sid);
}
