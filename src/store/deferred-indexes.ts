import type { Db } from './db';

/** `resource` and the tables the search index writer fills beside it. */
export const SEARCH_TABLES = ['resource', 'search_token_row', 'search_reference', 'search_date', 'search_string', 'search_compound', 'search_token_date'] as const;

/** An index build over millions of rows is no request: no statement timeout. */
const BUILD_TIMEOUT_MS = 6 * 3_600_000;
/** Memory for one index build's sort (PostgreSQL's default, 64 MB, spills a 10^7-row sort to disk). */
const BUILD_MEMORY = '256MB';

interface Deferred {
  name: string;
  definition: string;
}

/**
 * Runs `load` into an empty store with the secondary indexes of `tables` dropped, then builds them
 * again: PostgreSQL's advice for populating a database ("Remove Indexes", Populating a Database,
 * PostgreSQL manual 14.4), since building an index over the rows present sorts them once where a
 * load updates it row by row. Indexes behind a constraint (primary keys, unique and exclusion
 * constraints) and unique indexes stay: the load's conflicts and a booking's overlap checks need
 * them. Each definition is written to `deferred_index` before its index is dropped and removed once
 * it is built again, so a load that was killed leaves the store to the next `migrate` (every
 * start), which builds what is listed there (`buildDeferredIndexes`).
 *
 * Only for a store nothing else uses yet: it refuses a store that holds a resource. `parallel`
 * builds run side by side (PostgreSQL: one per core is the most that helps).
 */
export async function withIndexesBuiltAfter<T>(db: Db, tables: readonly string[], load: () => Promise<T>, o: { parallel?: number } = {}): Promise<T> {
  const { rows: present } = await db.query('SELECT 1 FROM resource LIMIT 1');
  if (present.length > 0) throw new Error('indexes are built after a load only into an empty store: this one holds resources');
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<Deferred>(
      `SELECT quote_ident(c.relname) AS name, pg_get_indexdef(i.indexrelid) AS definition
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_class t ON t.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = current_schema() AND t.relname = ANY($1::text[]) AND NOT i.indisunique
          AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
      [tables],
    );
    for (const r of rows) {
      await tx.query('INSERT INTO deferred_index (name, definition) VALUES ($1, $2)', [r.name, r.definition]);
      await tx.query(`DROP INDEX ${r.name}`);
    }
  });
  let result: T;
  try {
    result = await load();
  } finally {
    await buildDeferredIndexes(db, o.parallel ?? 1);
  }
  return result;
}

/**
 * Builds every index `deferred_index` lists (a load's, or one a killed load left) and removes it
 * from the list, each in a transaction of its own; `parallel` at a time.
 */
export async function buildDeferredIndexes(db: Db, parallel = 1): Promise<string[]> {
  const { rows: table } = await db.query<{ present: boolean }>("SELECT to_regclass('deferred_index') IS NOT NULL AS present");
  if (!table[0]?.present) return []; // a store migrated from another directory (tests), or before migration 010
  const { rows } = await db.query<Deferred>('SELECT name, definition FROM deferred_index ORDER BY name');
  const queue = [...rows];
  const built: string[] = [];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const index = next;
      const builtHere = await db.transaction(async (tx) => {
        // The row's lock orders two replicas starting at once: the second finds it gone.
        const { rows: listed } = await tx.query('SELECT 1 FROM deferred_index WHERE name = $1 FOR UPDATE', [index.name]);
        if (listed.length === 0) return false;
        if (db.kind === 'pg') {
          await tx.query('SET LOCAL statement_timeout = 0');
          await tx.query(`SET LOCAL maintenance_work_mem = '${BUILD_MEMORY}'`);
        }
        // IF NOT EXISTS: a build that committed but whose process died before the row went.
        await tx.query(index.definition.replace(/^CREATE INDEX /, 'CREATE INDEX IF NOT EXISTS '), [], { timeoutMs: BUILD_TIMEOUT_MS });
        await tx.query('DELETE FROM deferred_index WHERE name = $1', [index.name]);
        return true;
      });
      if (builtHere) built.push(index.name);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  return built;
}
