import { openPgPool } from './pg-pool';
import { openPglite } from './pglite';
import type { Db } from './db';

/**
 * Database access: one `Db` surface (`db.ts`) over a PostgreSQL pool (`pg-pool.ts`, bounded by
 * `timeouts.ts`) or PGlite (`pglite.ts`, its directory held by `data-dir-lock.ts`); what a failure
 * means in `errors.ts`, and which failures a transaction runs again after in `retried-transaction.ts`;
 * reads on PostgreSQL streaming replicas with read-your-writes in `read-replicas.ts`.
 */
export type { Db, QueryOptions, QueryResult, ReadRouting } from './db';
export { ReplicaSet, type SharedWriteMarks } from './read-replicas';
export { DataDirInUse } from './data-dir-lock';
export { SqlState, sqlState, StoreBusy, StoreUnavailable } from './errors';
export { openPglite, openPgliteFromImage, pgliteImage } from './pglite';
export { retriedTransaction, TRANSIENT_STATES, type RetryOptions } from './retried-transaction';
export { STORE_CONNECT_TIMEOUT_MS, STORE_QUERY_TIMEOUT_MS, STORE_STATEMENT_TIMEOUT_MS } from './timeouts';

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

/** PostgreSQL when a databaseUrl is given, otherwise PGlite (in `dataDir`, or in memory). */
export function openDb(opts: OpenDbOptions): Promise<Db> {
  if (!opts.databaseUrl) return openPglite(opts.dataDir);
  return openPgPool({ databaseUrl: opts.databaseUrl, schema: opts.schema, poolSize: opts.poolSize, idleTimeoutSec: opts.idleTimeoutSec });
}
