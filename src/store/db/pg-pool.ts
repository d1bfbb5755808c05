import crypto from 'node:crypto';
import { Pool, type PoolClient, type QueryConfig } from 'pg';
import { storeRefusals } from '../../server-lib/metrics';
import { CommitHooks, type Db, type QueryOptions, type QueryResult, type ReadRouting } from './db';
import { isConnectionFailure, isPoolWaitTimeout, StoreBusy, StoreUnavailable, unavailableOr } from './errors';
import { STORE_CONNECT_TIMEOUT_MS, STORE_QUERY_TIMEOUT_MS, STORE_STATEMENT_TIMEOUT_MS } from './timeouts';

export interface PgPoolOptions {
  databaseUrl: string;
  /** A schema of its own (tests); created if missing, `public` stays on the path. */
  schema?: string;
  /** False on a read-only replica: the schema is the primary's, only the search path is set. */
  createSchema?: boolean;
  poolSize?: number;
  /** Seconds an idle connection stays open (0: until the pool ends); default 300. */
  idleTimeoutSec?: number;
}

/** A Db on a pg.Pool with the store's bounds (`timeouts.ts`). */
export async function openPgPool(opts: PgPoolOptions): Promise<Db> {
  if (opts.schema && !/^[a-z_][a-z0-9_]*$/.test(opts.schema)) throw new Error(`invalid schema name ${opts.schema}`);
  if (opts.schema && opts.createSchema !== false) {
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
      // JIT compilation (on by default since PostgreSQL 12, above a plan cost of 100,000) costs
      // a second of CPU per execution: a batched search's generic plan (batched-reads.ts) is
      // estimated far above that bound and ran a second slower than without it, per statement.
      options: ['-c max_parallel_workers_per_gather=0', '-c jit=off', `-c statement_timeout=${STORE_STATEMENT_TIMEOUT_MS}`, opts.schema ? `-c search_path=${opts.schema},public` : ''].join(' ').trim(),
    }),
  );
}

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
  reads?: ReadRouting;
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
    await this.reads?.close();
    await this.pool.end();
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
