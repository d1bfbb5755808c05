export interface QueryOptions {
  prepare?: boolean;
  /**
   * PostgreSQL only: how long to wait for the answer, instead of the pool's STORE_QUERY_TIMEOUT_MS
   * (migrations pass a longer one, and lift the server's statement_timeout for their transaction).
   */
  timeoutMs?: number;
}

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

/**
 * One SQL surface over PostgreSQL (pg.Pool, `pg-pool.ts`) and PGlite (`pglite.ts`). `transaction`
 * gives a Db bound to one connection; nested `transaction` calls on it reuse that transaction.
 */
export interface Db {
  readonly kind: 'pg' | 'pglite';
  /** True on a Db bound to an open transaction. */
  readonly inTransaction: boolean;
  /**
   * `prepare`: keep the statement prepared per connection (PostgreSQL), for hot query shapes whose
   * planning costs as much as their execution (search).
   */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], opts?: QueryOptions): Promise<QueryResult<T>>;
  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` once what this Db wrote is visible to others: after the commit of its transaction
   * (never on a rollback), or at once outside one. For wake-ups, not for work that must not be
   * lost: `fn` runs in this process only.
   */
  afterCommit(fn: () => void): void;
  close(): Promise<void>;
  /**
   * PGlite only: memory beside the in-process database, shared by every application on it and as
   * volatile as the process (the guard keeps its per-request replay cache and counters here).
   */
  readonly processMemory?: Map<string, unknown>;
  /** PostgreSQL with DATABASE_READ_URL: where reads outside a transaction run (`read-replicas.ts`). */
  reads?: ReadRouting;
  /** PostgreSQL only: the connection pool right now (for /metrics). */
  poolState?(): { total: number; idle: number; waiting: number };
}

/**
 * Where reads go when PostgreSQL streaming replicas serve them (DATABASE_READ_URL): a read outside
 * a transaction runs on a replica that has replayed everything its reader wrote, else on the
 * primary; writes and everything inside a transaction stay on the primary (the Repository asks).
 */
export interface ReadRouting {
  /**
   * Runs `read` on a replica fit for `reader` (one that has replayed the reader's last write and
   * lags the primary by less than the allowed lag), or on the primary when none is; a replica that
   * fails under the read is left out and the read runs again on the primary.
   */
  read<T>(reader: string, read: (db: Db) => Promise<T>): Promise<T>;
  /** Says that `writer` has just committed a write (after the commit). */
  wrote(writer: string): void;
  /** Each replica's state, for /readyz. */
  state(): { status: 'ok' | 'degraded'; replicas: { replica: string; status: string; lagSeconds?: number; reason?: string }[] };
  close(): Promise<void>;
}

/** What a transaction runs once it has committed (`Db.afterCommit`): the base of both drivers' transaction Dbs. */
export class CommitHooks {
  private hooks: (() => void)[] = [];
  afterCommit(fn: () => void): void {
    this.hooks.push(fn);
  }
  committed(): void {
    const hooks = this.hooks;
    this.hooks = [];
    for (const fn of hooks) queueMicrotask(fn);
  }
}
