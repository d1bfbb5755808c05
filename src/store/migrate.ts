import fs from 'node:fs';
import path from 'node:path';
import { projectPath } from '../server-lib/paths';
import type { Db } from './db';
import { buildDeferredIndexes } from './deferred-indexes';

const MIGRATIONS_DIR = projectPath('migrations');
/** A migration may rewrite a large table, and waits for another replica's: no request-sized bound. */
const MIGRATION_TIMEOUT_MS = 30 * 60_000;

/**
 * Applies migrations/NNN_name.sql in name order, each once, each in its own transaction.
 * A PostgreSQL advisory lock keeps two replicas starting at once from racing.
 */
export async function migrate(db: Db, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .sort();
  return db.transaction(async (tx) => {
    if (db.kind === 'pg') await tx.query('SET LOCAL statement_timeout = 0');
    await tx.query('SELECT pg_advisory_xact_lock(7431001)', [], { timeoutMs: MIGRATION_TIMEOUT_MS });
    await tx.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set((await tx.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = fs.readFileSync(path.join(dir, file), 'utf8');
      await tx.query(sql, [], { timeoutMs: MIGRATION_TIMEOUT_MS });
      await tx.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
      applied.push(file);
    }
    return applied;
  }).then(async (applied) => {
    // Indexes a load into an empty store dropped and did not build again (it was killed).
    await buildDeferredIndexes(db);
    return applied;
  });
}

/**
 * Opens every table of the schema once, with its indexes (catalog entries, relation files), so
 * that the first request touching a table after start does not (cold start). Reads
 * nothing: the planner opens what a `LIMIT 0` scan would read.
 */
export async function openTables(db: Db): Promise<void> {
  const { rows } = await db.query<{ name: string }>(`SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`);
  for (const { name } of rows) await db.query(`SELECT * FROM ${name} LIMIT 0`);
}
