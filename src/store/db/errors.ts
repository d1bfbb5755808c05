import { storeRefusals } from '../../server-lib/metrics';

/** SQLSTATE codes callers react to (PostgreSQL, Appendix A "Error Codes"). */
export const SqlState = {
  uniqueViolation: '23505',
  exclusionViolation: '23P01',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
} as const;

export function sqlState(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

/**
 * The database cannot be reached or dropped the connection (not a bug, not bad input): callers
 * answer 503 with Retry-After, and the pool opens a new connection for the next request.
 */
export class StoreUnavailable extends Error {
  readonly code: 'store_unavailable' | 'store_busy' = 'store_unavailable';
  constructor(override readonly cause: unknown) {
    // The driver's own words (connect ECONNREFUSED …): the class already says what kind of failure it is.
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/**
 * Every pooled connection stayed checked out for STORE_CONNECT_TIMEOUT_MS while the database kept
 * answering (a burst larger than the pool, or slow statements holding it): the server is busy, the
 * database is not down. Still a 503 with Retry-After, but one that tells the operator to look at
 * the load and DB_POOL_SIZE rather than at the database.
 */
export class StoreBusy extends StoreUnavailable {
  override readonly code = 'store_busy';
  constructor(readonly waitedMs: number) {
    super(new Error(`no database connection became free within ${waitedMs / 1000} s`));
  }
}

/** SQLSTATE classes and driver errors that mean "no database right now" rather than "this statement failed". */
export function isConnectionFailure(err: unknown): boolean {
  const state = sqlState(err);
  // 57014: the server cancelled a statement that ran past statement_timeout (a stalled database).
  if (state && (/^08/.test(state) || ['57P01', '57P02', '57P03', '53300', '57014'].includes(state))) return true;
  const message = err instanceof Error ? err.message : '';
  const code = (err as { code?: unknown })?.code;
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH'].includes(String(code)) ||
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly|Query read timeout/.test(message)
  );
}

/** A connection failure as StoreUnavailable (counted); any other error as it is. */
export function unavailableOr(err: unknown): unknown {
  if (!isConnectionFailure(err)) return err;
  storeRefusals.inc({ reason: 'unavailable' });
  return new StoreUnavailable(err);
}

/** pg-pool's words when a caller waited connectionTimeoutMillis for a connection of a full pool. */
export function isPoolWaitTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === 'timeout exceeded when trying to connect';
}
