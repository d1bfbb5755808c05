import crypto from 'node:crypto';
import type { Resource } from '@medplum/fhirtypes';
import { gone, notFound, preconditionFailed } from '../server-lib/outcomes';
import type { Caller } from '../common/identity';
import { canSee } from '../server-lib/owner';
import { retriedTransaction, SqlState, TRANSIENT_STATES, type Db, type ReadRouting, type RetryOptions } from './db';
import { extractIndexRows } from './search/extract';
import { deleteIndexRows, deleteIndexRowsOf, indexWriteCtes, insertIndexRows, writableRows, WRITE_RESULT, type WritableIndexRows } from './search/index-writer';
import { TokenValues, type TokenValueRow } from './search/token-values';
import { executeSearch, type SearchRequest, type SearchResult } from './search/sql';
import type { SearchWindowCache } from './search/window-cache';
import type { WriteEvent, WriteInterceptor, WriteOrigin, WrittenEvent } from './write-interceptors';

export interface WriteOptions {
  /** Institution recorded as owner at creation (kept on later versions). */
  owner?: string | null;
  /** `W/"n"` or `n`: the write fails with 412 unless the current version is n. */
  ifMatch?: string;
  /** Who is asking: `undefined` sees everything (the repository itself, imports, jobs); otherwise server-lib/owner.ts decides. */
  scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>;
  /** What the interceptors are told; default `update` (or `create`). PATCH says `patch`. */
  interaction?: 'patch';
  /**
   * The write's own validation, run after the interceptors and before storing, so a domain rule
   * answers first (PATCH: an immutable element changed is that error, not a profile error).
   */
  validate?: (resource: Resource) => Resource;
  /**
   * Rows of the caller's own tables that belong with this version (the booking's holds of a new
   * appointment), given its id: written by the write's own statement, as data-modifying CTEs, so
   * they cost no round trip of their own. Their errors are the write's (the caller maps them).
   */
  alongside?: (id: string) => Alongside;
}

/**
 * Data-modifying statements (`INSERT ... SELECT ...`, no WITH of their own) numbering their
 * parameters from $1 in `params`; they become CTEs of another statement, renumbered.
 */
export interface Alongside {
  statements: string[];
  params: unknown[];
}

/** Two sets of rows alongside as one, the second's parameters numbered after the first's. */
function joined(a: Alongside | undefined, b: Alongside | undefined): Alongside | undefined {
  if (!a || !b) return a ?? b;
  const offset = a.params.length;
  return { statements: [...a.statements, ...b.statements.map((text) => text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`))], params: [...a.params, ...b.params] };
}

/** A statement made of `alongside` alone: `WITH` its statements, selecting nothing. */
export function alongsideStatement(a: Alongside): { sql: string; params: unknown[] } {
  return { sql: `WITH ${a.statements.map((text, i) => `alongside_${i} AS (${text})`).join(',\n')} SELECT 1`, params: a.params };
}

/** A locked row and, read in the same statement, the resource its reference names (`lockRows`). */
export interface LockedRow {
  row: StoredRow;
  followed?: StoredRow & { id: string };
}

export interface StoredRow {
  resource: Resource;
  deleted: boolean;
  owner: string | null;
  versionId: number;
}

/** Largest PostgreSQL `integer` (resource_version.version_id). */
const MAX_VERSION_ID = 2_147_483_647;

/**
 * Versioned resource store with typed search indexes, on one Db (pool or transaction). Every
 * create, update and delete runs the write interceptors it was composed with, inside the write's
 * transaction, telling them who writes (`actingAs`).
 */
export class Repository {
  /**
   * Rows this transaction holds locked (`readRow(..., {forUpdate})`), kept as they are now: the
   * repository is the only writer of `resource`, so a write that follows a locking read
   * (interceptors, PATCH, booking) needs no second read. Shared by every view of one transaction.
   */
  private locked = new Map<string, StoredRow | undefined>();
  /** Who the writes of this view are for. `rest` by default: the origin every interceptor applies to. */
  private acting: { origin: WriteOrigin; writer?: Pick<Caller, 'institution' | 'isOwner' | 'patient'> } = { origin: 'rest' };
  /** The store's read replicas (DATABASE_READ_URL), kept by every view of this repository, transactions included. */
  private routing?: ReadRouting;
  /** Ids of the token values written (search_token_value), shared by every view of this repository. */
  private tokenValues = new TokenValues();

  constructor(
    readonly db: Db,
    /** `$PUBLIC_URL/fhir`: absolute references to this base are indexed as local. */
    readonly baseUrl: string,
    readonly now: () => Date = () => new Date(),
    private readonly interceptors: readonly WriteInterceptor[] = [],
    /** Results of calendar window searches (SEARCH_CACHE_ENTRIES); none: every search asks the store. */
    private readonly searchCache?: SearchWindowCache,
  ) {
    this.routing = db.reads;
  }

  /** The same repository (transaction, lock cache, interceptors) writing for `origin` and `writer`. */
  actingAs(origin: WriteOrigin, writer?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Repository {
    const view = new Repository(this.db, this.baseUrl, this.now, this.interceptors, this.searchCache);
    view.locked = this.locked;
    view.acting = { origin, writer };
    view.routing = this.routing;
    view.tokenValues = this.tokenValues;
    return view;
  }

  /** The same repository (interceptors, origin) on another Db: a job's transaction. */
  on(db: Db): Repository {
    const bound = new Repository(db, this.baseUrl, this.now, this.interceptors, this.searchCache);
    bound.acting = this.acting;
    bound.routing = this.routing;
    bound.tokenValues = this.tokenValues;
    return bound;
  }

  /** Runs fn on a repository bound to one transaction (all-or-nothing); nested calls share it. */
  withTransaction<T>(fn: (repo: Repository) => Promise<T>): Promise<T> {
    return this.inTransaction(fn);
  }

  /**
   * withTransaction, run again in a new transaction when PostgreSQL aborted it for a concurrent
   * one (`retriedTransaction`: serialization failures and deadlocks unless `opts.retryOn` says
   * otherwise, a bounded number of runs, a random pause between them). Inside an outer
   * transaction it runs once.
   */
  withRetriedTransaction<T>(fn: (repo: Repository) => Promise<T>, opts?: RetryOptions): Promise<T> {
    return retriedTransaction(this.db, (tx) => fn(this.boundTo(tx)), opts);
  }

  async readRow(type: string, id: string, opts: { forUpdate?: boolean; db?: Db } = {}): Promise<StoredRow | undefined> {
    const key = `${type}/${id}`;
    if (opts.forUpdate && this.db.inTransaction && this.locked.has(key)) return this.locked.get(key);
    const { rows } = await (opts.db ?? this.db).query<{ content: Resource; deleted: boolean; owner: string | null; version_id: number }>(
      `SELECT content, deleted, owner, version_id FROM resource WHERE resource_type = $1 AND id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`,
      [type, id],
      { prepare: true },
    );
    const r = rows[0];
    const row = r && { resource: r.content, deleted: r.deleted, owner: r.owner, versionId: r.version_id };
    if (opts.forUpdate && this.db.inTransaction) this.locked.set(key, row);
    return row;
  }

  /**
   * Locks the rows of `ids` of one type in id order (concurrent callers never deadlock on them),
   * in one statement with, unlocked, the resource each one's reference at `follow.path` names
   * (`Slot.schedule`): what the caller checks next, without a round trip of its own. Returns the
   * rows that exist, deleted ones too; locked rows join the lock cache as with `readRow`. Rows
   * this transaction already holds come from that cache, without a followed row.
   * `read` (`{type, id}`): rows to read, unlocked, in the same statement (the booking's
   * participants); `read` in the answer has every one of them by `Type/id`, undefined when absent.
   */
  async lockRows(
    type: string,
    ids: string[],
    follow: { path: string[]; type: string },
    read: { type: string; id: string }[] = [],
  ): Promise<{ locked: Map<string, LockedRow>; read: Map<string, StoredRow | undefined> }> {
    const locked = new Map<string, LockedRow>();
    const readRows = new Map<string, StoredRow | undefined>(read.map((k) => [`${k.type}/${k.id}`, undefined]));
    const fresh: string[] = [];
    for (const id of [...new Set(ids)].sort()) {
      const key = `${type}/${id}`;
      if (!this.db.inTransaction || !this.locked.has(key)) {
        fresh.push(id);
        continue;
      }
      const held = this.locked.get(key);
      if (held) locked.set(id, { row: held });
    }
    if (fresh.length === 0 && read.length === 0) return { locked, read: readRows };
    type Row = { r_type: string | null; id: string; content: Resource; deleted: boolean; owner: string | null; version_id: number };
    const { rows } = await this.db.query<Row & { f_id: string | null; f_content: Resource | null; f_deleted: boolean | null; f_owner: string | null; f_version_id: number | null }>(
      `WITH locked AS (SELECT id, content, deleted, owner, version_id FROM resource WHERE resource_type = $1 AND id = ANY($2::text[]) ORDER BY id FOR UPDATE)
       SELECT NULL::text AS r_type, l.id, l.content, l.deleted, l.owner, l.version_id, f.id AS f_id, f.content AS f_content, f.deleted AS f_deleted, f.owner AS f_owner, f.version_id AS f_version_id
         FROM locked l LEFT JOIN resource f ON f.resource_type = $3 AND f.id = substring(l.content #>> $4::text[] from $5)
       UNION ALL
       SELECT r.resource_type, r.id, r.content, r.deleted, r.owner, r.version_id, NULL, NULL, NULL, NULL, NULL
         FROM unnest($6::text[], $7::text[]) AS k(resource_type, id) JOIN resource r ON r.resource_type = k.resource_type AND r.id = k.id`,
      // The followed id: the last path segment after `Type/`, relative or absolute (the caller compares it with its own reading of the reference).
      [type, fresh, follow.type, follow.path, `(?:^|/)${follow.type}/([^/]+)$`, read.map((k) => k.type), read.map((k) => k.id)],
      { prepare: true },
    );
    for (const r of rows) {
      const row: StoredRow = { resource: r.content, deleted: r.deleted, owner: r.owner, versionId: r.version_id };
      if (r.r_type !== null) {
        readRows.set(`${r.r_type}/${r.id}`, row);
        continue;
      }
      const followed = r.f_id !== null ? { id: r.f_id, resource: r.f_content as Resource, deleted: r.f_deleted as boolean, owner: r.f_owner, versionId: r.f_version_id as number } : undefined;
      locked.set(r.id, { row, followed });
    }
    if (this.db.inTransaction) for (const id of fresh) this.locked.set(`${type}/${id}`, locked.get(id)?.row);
    return { locked, read: readRows };
  }

  /** Keeps the lock cache in step with a write of this transaction. */
  private remember(type: string, id: string, row: StoredRow): void {
    if (this.db.inTransaction) this.locked.set(`${type}/${id}`, row);
  }

  /** The current version; 404 when absent or hidden from the scope, 410 when deleted. */
  async read<T extends Resource = Resource>(type: string, id: string, scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Promise<T> {
    return this.reading(scope, async (db) => {
      const row = await this.readRow(type, id, { db });
      if (!row || !canSee(row.owner, scope, row.resource)) throw notFound(type, id);
      if (row.deleted) throw gone(type, id);
      return row.resource as T;
    });
  }

  async vread(type: string, id: string, versionId: string, scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Promise<Resource> {
    return this.reading(scope, async (db) => {
      const row = await this.readRow(type, id, { db });
      // Version ids are PostgreSQL integers: a larger number names no version (not a failed query).
      if (!row || !canSee(row.owner, scope, row.resource) || !/^\d+$/.test(versionId) || Number(versionId) > MAX_VERSION_ID) throw notFound(type, `${id}/_history/${versionId}`);
      const version = await readVersion(db, type, id, Number(versionId));
      if (!version) throw notFound(type, `${id}/_history/${versionId}`);
      if (version.deleted) throw gone(type, id);
      return version.resource;
    });
  }

  /** Every version, newest first, with deletions marked. */
  async history(type: string, id: string, scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Promise<{ resource: Resource; deleted: boolean; versionId: number; lastUpdated: string }[]> {
    return this.reading(scope, async (db) => {
      const row = await this.readRow(type, id, { db });
      if (!row || !canSee(row.owner, scope, row.resource)) throw notFound(type, id);
      // The current version is the resource row; resource_version holds the ones it replaced.
      const { rows } = await db.query<{ content: Resource; deleted: boolean; version_id: number; last_updated: Date | string }>(
        `SELECT content, deleted, version_id, last_updated FROM resource WHERE resource_type = $1 AND id = $2
         UNION ALL
         SELECT content, deleted, version_id, last_updated FROM resource_version WHERE resource_type = $1 AND id = $2
         ORDER BY version_id DESC`,
        [type, id],
      );
      return rows.map((r) => ({ resource: r.content, deleted: r.deleted, versionId: r.version_id, lastUpdated: new Date(r.last_updated).toISOString() }));
    });
  }

  /** Create with a server-assigned id. */
  async create<T extends Resource>(resource: T, opts: WriteOptions = {}): Promise<T> {
    const id = crypto.randomUUID();
    return (await this.write({ ...resource, id }, opts, 'create')).resource as T;
  }

  /** Update or create with the given id (PUT semantics). */
  async update<T extends Resource>(resource: T, opts: WriteOptions = {}): Promise<{ resource: T; created: boolean }> {
    const r = await this.write(resource, opts, 'update');
    return { resource: r.resource as T, created: r.created };
  }

  /** Soft delete: a new version marked deleted; reads answer 410 afterwards. Idempotent. */
  async delete(type: string, id: string, opts: WriteOptions = {}): Promise<void> {
    await this.inTransaction(async (tx) => {
      const row = await tx.readRow(type, id, { forUpdate: true });
      if (!row || !canSee(row.owner, opts.scope, row.resource)) throw notFound(type, id);
      checkIfMatch(opts.ifMatch, row.versionId);
      if (row.deleted) return;
      await tx.intercept({ interaction: 'delete', type, previous: row.resource });
      const versionId = row.versionId + 1;
      const lastUpdated = tx.now().toISOString();
      const content = { ...row.resource, meta: { ...row.resource.meta, versionId: String(versionId), lastUpdated } };
      // The version it replaces moves to resource_version; the resource row becomes the deletion's version.
      await tx.db.query(
        `WITH old AS (INSERT INTO resource_version (resource_type, id, version_id, last_updated, deleted, content)
                      SELECT resource_type, id, version_id, last_updated, deleted, content FROM resource WHERE resource_type = $1 AND id = $2)
         UPDATE resource SET version_id = $3, last_updated = $4, deleted = true, content = $5 WHERE resource_type = $1 AND id = $2`,
        [type, id, versionId, lastUpdated, content],
      );
      await deleteIndexRows(tx.db, type, id, row.owner !== null);
      tx.remember(type, id, { resource: content as Resource, deleted: true, owner: row.owner, versionId });
      tx.wroteFor(this.acting.writer);
      const along = tx.alongWrites({ interaction: 'delete', type, id, versionId, resource: content as Resource });
      if (along) {
        const { sql, params } = alongsideStatement(along);
        await tx.db.query(sql, params);
      }
    });
  }

  /**
   * Expunges resources of one type (all with an owner, or all without), inside the caller's
   * transaction with their rows locked: the resource, every version and every index row go, as
   * HAPI's `$expunge` does; a read afterwards answers 404 and the history has nothing. For data
   * that is retired, not deleted by anyone (past free slots): a soft delete would keep the rows
   * retiring exists to remove. No interceptors run: nothing is written, nothing is notified.
   */
  async expunge(type: string, ids: string[], owned: boolean): Promise<void> {
    if (ids.length === 0) return;
    await deleteIndexRowsOf(this.db, type, ids, owned);
    await this.db.query('DELETE FROM resource_version WHERE resource_type = $1 AND id = ANY($2::text[])', [type, ids]);
    await this.db.query('DELETE FROM resource WHERE resource_type = $1 AND id = ANY($2::text[])', [type, ids]);
    for (const id of ids) this.locked.delete(`${type}/${id}`);
  }

  /**
   * Inserts many new resources (ids not yet stored) in chunks, a chunk's resource
   * rows with a multi-row statement and its index rows with one (`insertIndexRows`): the
   * demo calendars and benchmark data sets. No validation and no interceptors here: callers load
   * data they vouch for (free slots, calendars; nothing a rule or a subscriber acts on).
   */
  async bulkLoad(resources: Resource[], chunkSize = 500): Promise<void> {
    for (let i = 0; i < resources.length; i += chunkSize) {
      const chunk = resources.slice(i, i + chunkSize);
      await this.inTransaction(async (tx) => {
        const lastUpdated = tx.now().toISOString();
        const stored = chunk.map((r) => ({ ...r, meta: { ...r.meta, versionId: '1', lastUpdated } }) as Resource);
        const rows = stored.map((r) => [r.resourceType, r.id, 1, lastUpdated, false, r]);
        await insertMany(tx.db, 'resource (resource_type, id, version_id, last_updated, deleted, content)', rows);
        const indexes = await writableRows(tx.db, this.tokenValues, stored.map((r) => extractIndexRows(r, this.baseUrl)));
        await insertIndexRows(tx.db, stored.map((r, k) => ({ type: r.resourceType, id: r.id as string, index: indexes[k] })));
      });
    }
  }

  /** True when no resource was ever stored (demo data goes only into an empty store). */
  async isEmpty(): Promise<boolean> {
    const { rows } = await this.db.query('SELECT 1 FROM resource LIMIT 1');
    return rows.length === 0;
  }

  search(request: SearchRequest, scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>): Promise<SearchResult> {
    const opts = { scope, now: this.now(), baseUrl: this.baseUrl };
    return this.reading(scope, (db) => {
      if (!this.searchCache) return executeSearch(db, request, opts);
      // The stamp and the search on the same Db: an entry is never older than its stamp says.
      return this.searchCache.search(db, request, opts, () => executeSearch(db, request, opts));
    });
  }

  /**
   * Runs a caller's read outside a transaction where DATABASE_READ_URL routes it: a replica that
   * has replayed the caller's (institution's) last write, else the primary. Reads without a caller
   * (the repository's own, jobs, imports) and everything inside a transaction stay on this Db.
   */
  private reading<T>(scope: Pick<Caller, 'institution' | 'isOwner' | 'patient'> | undefined, read: (db: Db) => Promise<T>): Promise<T> {
    if (!this.routing || this.db.inTransaction || !scope?.institution) return read(this.db);
    return this.routing.read(scope.institution, read);
  }

  private async write(resource: Resource, opts: WriteOptions, mode: 'create' | 'update'): Promise<{ resource: Resource; created: boolean }> {
    const type = resource.resourceType;
    const id = resource.id as string;
    // A write aborted for a concurrent one (a deadlock with a booking, a serialization failure)
    // runs again; two PUTs creating the same new id race on the primary key: the loser runs
    // again, as an update.
    const retryOn = mode === 'update' ? [...TRANSIENT_STATES, SqlState.uniqueViolation] : TRANSIENT_STATES;
    return this.withRetriedTransaction(
      async (tx) => {
        // A server-assigned id (create) names no stored row: nothing to read or lock.
        const row = mode === 'create' ? undefined : await tx.readRow(type, id, { forUpdate: true });
        if (row && !canSee(row.owner, opts.scope, row.resource)) throw notFound(type, id);
        if (opts.ifMatch !== undefined) {
          if (!row) throw preconditionFailed(`${type}/${id} does not exist; If-Match cannot match`);
          checkIfMatch(opts.ifMatch, row.versionId);
        }
        const previous = row && !row.deleted ? row.resource : undefined;
        await tx.intercept({ interaction: opts.interaction ?? mode, type, resource, previous });
        const checked = opts.validate ? opts.validate(resource) : resource;
        const versionId = (row?.versionId ?? 0) + 1;
        const lastUpdated = tx.now().toISOString();
        const stored: Resource = { ...checked, id, meta: { ...checked.meta, versionId: String(versionId), lastUpdated } };
        const owner = row ? row.owner : (opts.owner ?? null);
        // One statement (data-modifying CTEs): the resource row, its version, its index rows and
        // the caller's rows alongside change together in a single round trip.
        const observed = tx.alongWrites({ interaction: opts.interaction ?? (row && !row.deleted ? 'update' : 'create'), type, id, versionId, resource: stored });
        const index = extractIndexRows(stored, this.baseUrl);
        const { sql, params } = writeStatement({ type, id, versionId, lastUpdated, stored, owner, exists: !!row }, { ...index, tokenValueIds: this.tokenValues.idsKnown(tx.db, index.tokens) }, joined(opts.alongside?.(id), observed));
        const { rows: values } = await tx.db.query<TokenValueRow>(sql, params, { prepare: true });
        this.tokenValues.learn(tx.db, values);
        tx.remember(type, id, { resource: stored, deleted: false, owner, versionId });
        tx.wroteFor(this.acting.writer);
        return { resource: stored, created: !row || row.deleted };
      },
      { retryOn },
    );
  }

  /** The writer reads its write from now on: replicas serve it only once they have replayed it. */
  private wroteFor(writer: Pick<Caller, 'institution'> | undefined): void {
    const routing = this.routing;
    if (routing && writer?.institution) this.db.afterCommit(() => routing.wrote(writer.institution));
  }

  /** Runs the interceptors of the event's type, in the order they were composed. */
  private async intercept(event: Omit<WriteEvent, 'origin' | 'writer' | 'repo'>): Promise<void> {
    for (const interceptor of this.interceptors) {
      if (interceptor.beforeWrite && interceptor.types.includes(event.type)) await interceptor.beforeWrite({ ...event, origin: this.acting.origin, writer: this.acting.writer, repo: this });
    }
  }

  /** The rows the interceptors that observe writes (`alongWrite`) store with this version, in the order they were composed. */
  private alongWrites(event: Omit<WrittenEvent, 'origin' | 'writer' | 'repo'>): Alongside | undefined {
    let out: Alongside | undefined;
    for (const interceptor of this.interceptors) {
      if (interceptor.alongWrite && interceptor.types.includes(event.type)) out = joined(out, interceptor.alongWrite({ ...event, origin: this.acting.origin, writer: this.acting.writer, repo: this }));
    }
    return out;
  }

  private inTransaction<T>(fn: (tx: Repository) => Promise<T>): Promise<T> {
    return this.db.transaction((tx) => fn(this.boundTo(tx)));
  }

  /** This repository on the Db of a transaction it opened (itself when it already was in one). */
  private boundTo(tx: Db): Repository {
    return tx === this.db ? this : this.on(tx);
  }
}

/** One stored version (a deletion's version is its marker), whoever owns it: for consumers of outbox events. */
export async function readVersion(db: Db, type: string, id: string, versionId: number): Promise<{ resource: Resource; deleted: boolean } | undefined> {
  // The current version is the resource row, earlier ones are in resource_version.
  const { rows } = await db.query<{ content: Resource; deleted: boolean }>(
    `SELECT content, deleted FROM resource WHERE resource_type = $1 AND id = $2 AND version_id = $3
     UNION ALL
     SELECT content, deleted FROM resource_version WHERE resource_type = $1 AND id = $2 AND version_id = $3`,
    [type, id, versionId],
  );
  return rows[0] && { resource: rows[0].content, deleted: rows[0].deleted };
}

/** RFC 9110 §13.1.1 with FHIR's weak ETags (R4 http.html#concurrency): `W/"n"`, `"n"` or `n`. */
export function checkIfMatch(ifMatch: string | undefined, current: number): void {
  if (ifMatch === undefined) return;
  const m = /^(?:W\/)?"?(\d+)"?$/.exec(ifMatch.trim());
  if (!m || Number(m[1]) !== current) throw preconditionFailed(`If-Match ${ifMatch} does not match the current version W/"${current}"`);
}

/**
 * The write of one version as one SQL statement: resource row, version row, the index rows that
 * change (`indexWriteCtes`) and the caller's rows alongside.
 */
function writeStatement(
  w: { type: string; id: string; versionId: number; lastUpdated: string; stored: Resource; owner: string | null; exists: boolean },
  rows: WritableIndexRows,
  alongside?: Alongside,
): { sql: string; params: unknown[] } {
  const params: unknown[] = w.exists ? [w.type, w.id, w.versionId, w.lastUpdated, w.stored] : [w.type, w.id, w.versionId, w.lastUpdated, w.stored, w.owner];
  const ctes: string[] = [
    w.exists
      ? 'res AS (UPDATE resource SET version_id = $3, last_updated = $4, deleted = false, content = $5 WHERE resource_type = $1 AND id = $2)'
      : 'res AS (INSERT INTO resource (resource_type, id, version_id, last_updated, deleted, owner, content) VALUES ($1, $2, $3, $4, false, $6::text, $5))',
  ];
  // The version this one replaces moves to resource_version (read from the statement's snapshot,
  // before `res` changes the row); a new resource has none, its only version is the resource row.
  if (w.exists) {
    ctes.push('ver AS (INSERT INTO resource_version (resource_type, id, version_id, last_updated, deleted, content) SELECT resource_type, id, version_id, last_updated, deleted, content FROM resource WHERE resource_type = $1 AND id = $2)');
  }
  ctes.push(...indexWriteCtes(params, { type: w.type, exists: w.exists, owned: w.owner !== null }, rows));
  if (alongside) {
    const offset = params.length;
    params.push(...alongside.params);
    alongside.statements.forEach((text, i) => ctes.push(`alongside_${i} AS (${text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + offset}`)})`));
  }
  return { sql: `WITH ${ctes.join(',\n')} ${WRITE_RESULT}`, params };
}

/** Multi-row INSERT, split to stay under PostgreSQL's 65535 bind parameters. */
async function insertMany(db: Db, target: string, rows: unknown[][]): Promise<void> {
  if (rows.length === 0) return;
  const perRow = rows[0].length;
  const maxRows = Math.floor(60000 / perRow);
  for (let i = 0; i < rows.length; i += maxRows) {
    const part = rows.slice(i, i + maxRows);
    const params: unknown[] = [];
    const tuples = part.map((row) => `(${row.map((v) => (params.push(v), `$${params.length}`)).join(', ')})`);
    await db.query(`INSERT INTO ${target} VALUES ${tuples.join(', ')}`, params);
  }
}
