import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Pool, type PoolClient, type QueryConfig } from 'pg';
import { storeRefusals } from '../shared/metrics';

// The contrib entry ships ESM-only typings; at run time its CommonJS build loads fine.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { btree_gist } = require('@electric-sql/pglite/contrib/btree_gist') as { btree_gist: import('@electric-sql/pglite').Extension };

export interface QueryOptions {
  prepare?: boolean;
  /**
   * PostgreSQL only: how long to wait for the answer, instead of the pool's STORE_QUERY_TIMEOUT_MS
   * (migrations pass a longer one, and lift the server's statement_timeout for their transaction).
   */
  timeoutMs?: number;
}

/**
 * PostgreSQL bounds (issue 16): with the database partitioned away, a request gets its 503 within
 * 5 s instead of waiting for TCP to give up. A pooled connection (or a free slot in the pool) must
 * come within STORE_CONNECT_TIMEOUT_MS, a statement's answer within STORE_QUERY_TIMEOUT_MS; a
 * connection that missed its answer is destroyed, never reused.
 */
export const STORE_CONNECT_TIMEOUT_MS = 3000;
export const STORE_QUERY_TIMEOUT_MS = 3000;
/**
 * The server gives up a little before the client does: a statement the client stopped waiting
 * for must not commit afterwards (a refresh token consumed after its client was told 503).
 */
export const STORE_STATEMENT_TIMEOUT_MS = 2800;

/** Names of the prepared statement texts seen (a few hundred shapes; bounded all the same). */
const statementNames = new Map<string, string>();
const STATEMENT_NAMES_KEPT = 2_000;

/** Prepared-statement name of a query text. */
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `t_${crypto.createHash('sha1').update(sql).digest('hex').slice(0, 24)}`;
    if (statementNames.size >= STATEMENT_NAMES_KEPT) statementNames.clear();
    statementNames.set(sql, name);
  }
  return name;
}

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

/**
 * One SQL surface over PostgreSQL (pg.Pool) and PGlite. `transaction` gives a Db bound to one
 * connection; nested `transaction` calls on it reuse that transaction.
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
  /** PostgreSQL only: the connection pool right now (for /metrics). */
  poolState?(): { total: number; idle: number; waiting: number };
}

/** SQLSTATE codes callers react to. */
export const SqlState = {
  uniqueViolation: '23505',
  exclusionViolation: '23P01',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
} as const;

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
function isConnectionFailure(err: unknown): boolean {
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

function unavailableOr(err: unknown): unknown {
  if (!isConnectionFailure(err)) return err;
  storeRefusals.inc({ reason: 'unavailable' });
  return new StoreUnavailable(err);
}

/** pg-pool's words when a caller waited connectionTimeoutMillis for a connection of a full pool. */
function isPoolWaitTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === 'timeout exceeded when trying to connect';
}

export function sqlState(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

export interface OpenDbOptions {
  databaseUrl?: string;
  /** PGlite directory; undefined with no databaseUrl: in memory. */
  dataDir?: string;
  /** PostgreSQL only: a schema of its own (tests); created if missing, `public` stays on the path. */
  schema?: string;
  poolSize?: number;
  /** PostgreSQL only: seconds an idle connection stays open (0: until the pool ends); default 300. */
  idleTimeoutSec?: number;
}

export async function openDb(opts: OpenDbOptions): Promise<Db> {
  if (!opts.databaseUrl) return openPglite(opts.dataDir);
  if (opts.schema) {
    if (!/^[a-z_][a-z0-9_]*$/.test(opts.schema)) throw new Error(`invalid schema name ${opts.schema}`);
    const admin = new Pool({ connectionString: opts.databaseUrl, max: 1 });
    await admin.query(`CREATE SCHEMA IF NOT EXISTS ${opts.schema}`).finally(() => admin.end());
  }
  return new PgDb(
    new Pool({
      connectionString: opts.databaseUrl,
      max: opts.poolSize ?? 20,
      // A new connection costs the request that needs it a few milliseconds (a backend to start,
      // authentication, statements prepared again): a burst after a quiet spell should not pay it.
      idleTimeoutMillis: (opts.idleTimeoutSec ?? 300) * 1000,
      connectionTimeoutMillis: STORE_CONNECT_TIMEOUT_MS,
      query_timeout: STORE_QUERY_TIMEOUT_MS,
      // A peer that vanished without a FIN is noticed on idle connections too.
      keepAlive: true,
      // Parallel plans cost milliseconds of worker start-up for queries that run in one or two;
      // under concurrent load they only add latency (search probes are index-only scans).
      options: ['-c max_parallel_workers_per_gather=0', `-c statement_timeout=${STORE_STATEMENT_TIMEOUT_MS}`, opts.schema ? `-c search_path=${opts.schema},public` : ''].join(' ').trim(),
    }),
  );
}

/** PGlite in `dataDir` (persisted) or in memory when dataDir is undefined. */
export async function openPglite(dataDir?: string): Promise<Db> {
  if (!dataDir) return new PgliteDb(await PGlite.create(undefined, { extensions: { btree_gist } }));
  fs.mkdirSync(dataDir, { recursive: true });
  const release = lockDataDir(dataDir);
  try {
    const pg = await PGlite.create(`${dataDir}/pgdata`, { extensions: { btree_gist } });
    return new PgliteDb(pg, release);
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * An in-memory PGlite started from an image of another one's data directory (`pgliteImage`): it
 * skips initdb, 3-5 s of CPU here, which a test suite opening a store per file pays a hundred times.
 */
export async function openPgliteFromImage(image: Blob): Promise<Db> {
  return new PgliteDb(await PGlite.create(undefined, { extensions: { btree_gist }, loadDataDir: image }));
}

/** The data directory of a PGlite store as an uncompressed tar image, for openPgliteFromImage. */
export function pgliteImage(db: Db): Promise<Blob> {
  if (!(db instanceof PgliteDb)) throw new TypeError('pgliteImage: not a PGlite store');
  return db.image();
}

/** The embedded store's directory is held by another live process (serve, import, migrate). */
export class DataDirInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`${dataDir} is in use by process ${pid}`);
  }
}

/**
 * PGlite is one PostgreSQL backend writing its files without any inter-process locking: a second
 * process on the same directory (an import behind a running server's back) corrupts it. A lock
 * file created exclusively holds our pid; a lock left by a dead process is taken over.
 */
function lockDataDir(dataDir: string): () => void {
  const file = path.join(dataDir, 'terminus.lock');
  for (let attempt = 0; ; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 2) throw err;
      const pid = Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) throw new DataDirInUse(dataDir, pid);
      // Stale (the holder died, or the file is torn): remove it and race for it again.
      fs.rmSync(file, { force: true });
    }
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    try {
      if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.rmSync(file, { force: true });
    } catch {
      // Already gone.
    }
  };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function queryConfig(sql: string, values: unknown[], opts: QueryOptions): QueryConfig {
  return {
    text: sql,
    values,
    ...(opts.prepare ? { name: statementName(sql) } : {}),
    ...(opts.timeoutMs !== undefined ? { query_timeout: opts.timeoutMs } : {}),
  };
}

class PgDb implements Db {
  readonly kind = 'pg' as const;
  readonly inTransaction = false;
  /** When a connection last failed (refused, dropped, an answer or a connect timed out), epoch ms. */
  private lastFailureAt = Number.NEGATIVE_INFINITY;
  constructor(private readonly pool: Pool) {
    // An idle connection that the server drops (restart, pg_terminate_backend, a network cut)
    // emits 'error' on the pool: without a listener that event would end the process. The pool has
    // already discarded the connection; the next query opens a new one.
    pool.on('error', () => {
      this.lastFailureAt = Date.now();
    });
  }

  afterCommit(fn: () => void): void {
    queueMicrotask(fn);
  }

  async query<T>(sql: string, params: unknown[] = [], opts: QueryOptions = {}): Promise<QueryResult<T>> {
    const started = Date.now();
    try {
      const r = await this.pool.query(queryConfig(sql, params, opts));
      return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
    } catch (err) {
      throw this.failure(err, started);
    }
  }

  async transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    let client: PoolClient;
    const started = Date.now();
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.failure(err, started);
    }
    // A checked-out connection is ours to watch: a drop between two statements emits 'error' on it.
    let broken: unknown;
    const onError = (err: unknown) => {
      broken = err;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const tx = new PgTxDb(client);
      const result = await fn(tx);
      await client.query('COMMIT');
      tx.committed();
      return result;
    } catch (err) {
      broken ??= isConnectionFailure(err) ? err : undefined;
      // A connection that lost its peer (or missed an answer) cannot roll back: destroying it does,
      // on the server's side, without waiting another timeout for a ROLLBACK that cannot come.
      if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      throw this.failure(err, started);
    } finally {
      client.off('error', onError);
      // A connection that failed is destroyed, not handed to the next request.
      client.release(broken instanceof Error ? broken : broken ? new Error(String(broken)) : undefined);
    }
  }

  /**
   * What a failed statement or checkout means. A wait for a connection of a full pool that timed
   * out is the server being busy, unless connections failed while it waited or just before (a
   * partition under load fills the pool with connections that never answer): then the database is
   * what is missing. Every other connection failure marks the database as failing now.
   */
  private failure(err: unknown, started: number): unknown {
    // Already judged where it happened (the outer Db used inside a transaction).
    if (err instanceof StoreUnavailable) return err;
    if (isPoolWaitTimeout(err) && this.lastFailureAt < started - STORE_CONNECT_TIMEOUT_MS) {
      storeRefusals.inc({ reason: 'busy' });
      return new StoreBusy(STORE_CONNECT_TIMEOUT_MS);
    }
    if (isConnectionFailure(err) && !isPoolWaitTimeout(err)) this.lastFailureAt = Date.now();
    return unavailableOr(err);
  }

  poolState(): { total: number; idle: number; waiting: number } {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** What a transaction runs once it has committed (`Db.afterCommit`). */
class CommitHooks {
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

class PgTxDb extends CommitHooks implements Db {
  readonly kind = 'pg' as const;
  readonly inTransaction = true;
  constructor(private readonly client: PoolClient) {
    super();
  }
  async query<T>(sql: string, params: unknown[] = [], opts: QueryOptions = {}): Promise<QueryResult<T>> {
    const r = await this.client.query(queryConfig(sql, params, opts));
    return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
  }
  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    return fn(this);
  }
  async close(): Promise<void> {}
}

type PGliteInstance = PGlite;

/**
 * PGlite is a single connection: statements outside a transaction and whole transactions are
 * serialised through one queue so a transaction never interleaves with another caller's SQL.
 */
class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  readonly inTransaction = false;
  readonly processMemory = new Map<string, unknown>();
  private tail: Promise<unknown> = Promise.resolve();
  constructor(
    private readonly pg: PGliteInstance,
    private readonly unlock: () => void = () => undefined,
  ) {}

  /**
   * Every unit starts in a turn of its own (`setImmediate`): the event loop polls its sockets
   * between two units, so requests that arrive while others queue join the queue in the order they
   * came, and a new connection is accepted after one unit (Node accepts one connection per poll).
   * A unit that found the queue empty used to start at once; but one poll hands over every socket
   * that is ready, and each of their callbacks found the queue empty again (the unit before had
   * finished in between): a whole batch of units then ran in one poll, and a burst of new clients
   * waited one such batch each to be accepted (issue 15: 32 new booking connections, p99 2 s).
   */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const start = () => new Promise<void>((resolve) => setImmediate(resolve)).then(fn);
    const run = this.tail.then(start, start);
    const done = () => undefined;
    this.tail = run.then(done, done);
    return run;
  }

  query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return this.exclusive(() => rawQuery<T>(this.pg, sql, params));
  }

  afterCommit(fn: () => void): void {
    queueMicrotask(fn);
  }

  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      await this.pg.exec('BEGIN');
      try {
        const tx = new PgliteTxDb(this.pg);
        const result = await fn(tx);
        await this.pg.exec('COMMIT');
        tx.committed();
        return result;
      } catch (err) {
        await this.pg.exec('ROLLBACK').catch(() => undefined);
        throw err;
      }
    });
  }

  image(): Promise<Blob> {
    return this.exclusive(() => this.pg.dumpDataDir('none'));
  }

  async close(): Promise<void> {
    try {
      await this.exclusive(() => this.pg.close());
    } finally {
      this.unlock();
    }
  }
}

class PgliteTxDb extends CommitHooks implements Db {
  readonly kind = 'pglite' as const;
  readonly inTransaction = true;
  constructor(private readonly pg: PGliteInstance) {
    super();
  }
  query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    return rawQuery<T>(this.pg, sql, params);
  }
  transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    return fn(this);
  }
  async close(): Promise<void> {}
}

async function rawQuery<T>(pg: PGliteInstance, sql: string, params: unknown[]): Promise<QueryResult<T>> {
  if (params.length === 0 && sql.includes(';')) {
    // Multi-statement scripts (migrations) go through exec.
    const results = await pg.exec(sql);
    const last = results[results.length - 1];
    return { rows: (last?.rows ?? []) as T[], rowCount: last?.affectedRows ?? 0 };
  }
  const r = await pg.query<T>(sql, params);
  return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
}
