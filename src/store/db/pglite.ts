import fs from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { CommitHooks, type Db, type QueryResult } from './db';
import { lockDataDir } from './data-dir-lock';

// The contrib entry ships ESM-only typings; at run time its CommonJS build loads fine.
const { btree_gist } = require('@electric-sql/pglite/contrib/btree_gist') as { btree_gist: import('@electric-sql/pglite').Extension };

/** PGlite in `dataDir` (persisted, held by `lockDataDir`) or in memory when dataDir is undefined. */
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
    private readonly pg: PGlite,
    private readonly unlock: () => void = () => undefined,
  ) {}

  /**
   * Every unit starts in a turn of its own (`setImmediate`): the event loop polls its sockets
   * between two units, so requests that arrive while others queue join the queue in the order they
   * came, and a new connection is accepted after one unit (Node accepts one connection per poll).
   * A unit that found the queue empty used to start at once; but one poll hands over every socket
   * that is ready, and each of their callbacks found the queue empty again (the unit before had
   * finished in between): a whole batch of units then ran in one poll, and a burst of new clients
   * waited one such batch each to be accepted (32 new booking connections: p99 2 s).
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
  constructor(private readonly pg: PGlite) {
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

async function rawQuery<T>(pg: PGlite, sql: string, params: unknown[]): Promise<QueryResult<T>> {
  if (params.length === 0 && sql.includes(';')) {
    // Multi-statement scripts (migrations) go through exec.
    const results = await pg.exec(sql);
    const last = results[results.length - 1];
    return { rows: (last?.rows ?? []) as T[], rowCount: last?.affectedRows ?? 0 };
  }
  const r = await pg.query<T>(sql, params);
  return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
}
