import type { Db } from '../db';
import { toTimestamp } from './dates';
import type { CompoundRow, IndexRows } from './extract';
import { COMPOUND_INDEXES, SHORT_RANGE_MS, TOKEN_DATE_INDEXES } from './parameters';
import { tokenValueColumns, valueOrder, type TokenValues } from './token-values';

/**
 * The only writer of the search tables (migrations 001-009): which tables there are, their
 * columns and how a resource's `IndexRows` fill them, and the three ways rows change: the
 * CTEs of one version's write (`indexWriteCtes`), the removal of a deleted resource's rows
 * (`deleteIndexRows`) and the insert of many new resources at once (`insertIndexRows`). Each
 * keeps `search_generation` in step with the compound rows it adds or removes.
 */

/**
 * A resource's index rows with the ids of its token values where they are known (`TokenValues`):
 * what the tables take. A version's write statement inserts the values with no id yet itself
 * (`TOKEN_VALUES_CTE`); a bulk load has them all.
 */
export interface WritableIndexRows extends IndexRows {
  /** The `search_token_value` id of each of `tokens`, in order; undefined: not known yet. */
  tokenValueIds: readonly (number | undefined)[];
}

/** The index rows of resources with every token value's id, asked for in one statement (`Repository.bulkLoad`). */
export async function writableRows(db: Db, values: TokenValues, indexes: readonly IndexRows[]): Promise<WritableIndexRows[]> {
  const ids = await values.ids(db, indexes.flatMap((index) => index.tokens));
  let at = 0;
  return indexes.map((index) => ({ ...index, tokenValueIds: ids.slice(at, (at += index.tokens.length)) }));
}

/**
 * The CTE of a version's write that inserts the token values it has no id for, in key order, and
 * returns the ids of all of them: a value another writer inserted first (committed, or committed
 * while this one waits for it) is returned by its no-op update, which locks it as the insert would.
 * Only values never seen by this process come here (`TokenValues` keeps the others), so the lock
 * and the row version it leaves are a first write's cost, not every write's.
 */
const TOKEN_VALUES_CTE = 'tv';
function tokenValuesCte(params: unknown[], index: WritableIndexRows): string {
  const unknown = index.tokens.filter((_, k) => index.tokenValueIds[k] === undefined).map(tokenValueColumns).sort(valueOrder);
  const first = pushColumns(params, 5, unknown);
  return `${TOKEN_VALUES_CTE} AS (INSERT INTO search_token_value (param, system, code, system_full, code_full)
    SELECT u.c0, u.c1, u.c2, u.c3, u.c4 FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::text[], $${first + 3}::text[], $${first + 4}::text[]) WITH ORDINALITY AS u(c0, c1, c2, c3, c4, n) ORDER BY u.n
    ON CONFLICT (param, code, system) DO UPDATE SET param = EXCLUDED.param
    RETURNING value_id, param, system, code)`;
}

/** The SELECT list that ends a version's write statement: the token values it inserted or found, for `TokenValues.learn`. */
export const WRITE_RESULT = `SELECT value_id, param, system, code FROM ${TOKEN_VALUES_CTE}`;

/** One search table: the columns after (resource_type, id), with their SQL types, and its rows of a resource. */
interface IndexTable {
  /** Names the CTEs of a write (`ins_<name>`, `del_<name>`). */
  readonly name: string;
  readonly table: string;
  readonly columns: readonly (readonly [column: string, sqlType: string])[];
  /** The resource types with rows here (all when absent): a write of another type leaves the table alone. */
  readonly only?: (type: string) => boolean;
  rows(index: WritableIndexRows): unknown[][];
  /**
   * In a version's write, where the rows come from when not all are in `rows` (SQL yielding
   * `u(c0, ...)`, given the first parameter number of `rows`' arrays).
   */
  writeSource?(first: number): string;
}

/**
 * The tables in the order their rows are written. Every text column that is indexed holds an
 * `indexKey` (index-key.ts); `*_full` keeps the whole value when the key is not the value.
 */
const INDEX_TABLES: readonly IndexTable[] = [
  {
    // The values themselves are in search_token_value (token-values.ts); reads use the view search_token.
    name: 'token',
    table: 'search_token_row',
    columns: [['value_id', 'int4']],
    rows: (index) => index.tokenValueIds.filter((id) => id !== undefined).map((id) => [id]),
    // The known ids, and those of the values the statement inserts or finds (TOKEN_VALUES_CTE).
    writeSource: (first) => `(SELECT value_id FROM ${TOKEN_VALUES_CTE} UNION ALL SELECT unnest($${first}::int4[])) AS u(c0)`,
  },
  {
    name: 'reference',
    table: 'search_reference',
    columns: [['param', 'text'], ['target_type', 'text'], ['target_id', 'text'], ['target_url', 'text']],
    rows: (index) => index.references.map((r) => [r.param, r.targetType, r.targetId, r.targetUrl]),
  },
  {
    name: 'date',
    table: 'search_date',
    columns: [['param', 'text'], ['low', 'timestamptz'], ['high', 'timestamptz']],
    rows: (index) => index.dates.map((d) => [d.param, toTimestamp(d.range.low), toTimestamp(d.range.high)]),
  },
  {
    name: 'string',
    table: 'search_string',
    columns: [['param', 'text'], ['norm', 'text'], ['exact', 'text'], ['norm_full', 'text']],
    rows: (index) => index.strings.map((x) => [x.param, x.norm, x.exact, x.normFull ?? null]),
  },
  {
    name: 'compound',
    table: 'search_compound',
    columns: [['ref', 'text'], ['code', 'text'], ['during', 'tstzrange'], ['short', 'bool']],
    only: windowed,
    rows: (index) => index.compounds.map((c) => [c.ref, c.code, rangeLiteral(c.range), isShort(c.range)]),
  },
  {
    name: 'token_date',
    table: 'search_token_date',
    columns: [['system', 'text'], ['code', 'text'], ['during', 'tstzrange'], ['short', 'bool']],
    only: (type) => TOKEN_DATE_INDEXES[type] !== undefined,
    // An absent system is '' here as in search_token_value (migrations/008): one condition serves both.
    rows: (index) => index.tokenDates.map((x) => [x.system ?? '', x.code, rangeLiteral(x.range), isShort(x.range)]),
  },
];

const COMPOUND = INDEX_TABLES.find((t) => t.name === 'compound') as IndexTable;

/** True for resource types whose calendar windows are cached (a compound index, search_generation). */
function windowed(type: string): boolean {
  return COMPOUND_INDEXES[type] !== undefined;
}

/** The tables a resource of `type` has rows in. */
function tablesOf(type: string): IndexTable[] {
  return INDEX_TABLES.filter((t) => !t.only || t.only(type));
}

/** Days since 1970-01-01 (UTC) of a compound row's date: the unit of search_generation. */
export function generationDay(ms: number): number {
  return Math.floor(ms / 86_400_000);
}

/** A window row's range is short: finite and at most SHORT_RANGE_MS long. */
function isShort(range: { low: number; high: number }): boolean {
  return Number.isFinite(range.low) && Number.isFinite(range.high) && range.high - range.low <= SHORT_RANGE_MS;
}

/** Inclusive tstzrange literal of a date range. */
function rangeLiteral(range: { low: number; high: number }): string {
  return `[${toTimestamp(range.low)},${toTimestamp(range.high)}]`;
}

/** `unnest` of one parameter per column (numbered from `first`), as `u(c0, c1, ...)`. */
function unnestRows(types: readonly string[], first: number): string {
  return `unnest(${types.map((type, k) => `$${first + k}::${type}[]`).join(', ')}) AS u(${types.map((_, k) => `c${k}`).join(', ')})`;
}

/** Pushes the rows as one array per column; returns the number of the first. */
function pushColumns(params: unknown[], width: number, rows: unknown[][]): number {
  const first = params.length + 1;
  for (let k = 0; k < width; k++) params.push(rows.map((row) => row[k]));
  return first;
}

/**
 * The index CTEs of one version's write statement, whose `$1` and `$2` are the resource's type and
 * id; their parameters are appended to `params`. A new resource inserts its rows. A new version of
 * a stored one (`exists`) rewrites only the rows that change: rows it no longer has are deleted,
 * rows it adds are inserted, the rest stay (every CTE sees the tables as they were before the
 * statement), so a booked Slot changes its status rows and keeps the others. Index rows go as
 * arrays (one parameter per column, unnest): the statement's text depends only on the resource
 * type's shape, not on how many rows it has, so PostgreSQL prepares it once per connection.
 * `owned`: the resource has an owner (search_generation counts owned compound rows).
 */
export function indexWriteCtes(params: unknown[], w: { type: string; exists: boolean; owned: boolean }, index: WritableIndexRows): string[] {
  const ctes: string[] = [tokenValuesCte(params, index)];
  for (const t of tablesOf(w.type)) {
    const first = pushColumns(params, t.columns.length, t.rows(index));
    const source = t.writeSource ? t.writeSource(first) : unnestRows(t.columns.map(([, type]) => type), first);
    const names = t.columns.map((_, k) => `c${k}`).join(', ');
    const insert = `INSERT INTO ${t.table} (resource_type, id, ${t.columns.map(([c]) => c).join(', ')}) SELECT $1, $2, ${names} FROM ${source}`;
    // A write of a windowed type reports the compound rows it changes to the generation CTE.
    const returning = t === COMPOUND && w.exists ? ' RETURNING ref, during' : '';
    if (!w.exists) {
      ctes.push(`ins_${t.name} AS (${insert}${returning})`);
      continue;
    }
    const same = t.columns.map(([c], k) => `t.${c} IS NOT DISTINCT FROM u.c${k}`).join(' AND ');
    ctes.push(
      `del_${t.name} AS (DELETE FROM ${t.table} t WHERE t.resource_type = $1 AND t.id = $2 AND NOT EXISTS (SELECT 1 FROM ${source} WHERE ${same})${returning})`,
      `ins_${t.name} AS (${insert} WHERE NOT EXISTS (SELECT 1 FROM ${t.table} t WHERE t.resource_type = $1 AND t.id = $2 AND ${same})${returning})`,
    );
  }
  if (windowed(w.type)) {
    if (w.exists) {
      // Every day the resource was in changes (its content is part of a cached result), rows it keeps too.
      ctes.push(`before_compound AS (SELECT ref, during FROM ${COMPOUND.table} WHERE resource_type = $1 AND id = $2)`);
      ctes.push(changedGenerationCte({ before: 'before_compound', removed: 'del_compound', added: 'ins_compound' }, w.owned));
    } else {
      ctes.push(generationCte(params, undefined, index.compounds, w.owned));
    }
  }
  return ctes;
}

/** Removes every index row of a deleted resource, and raises the generations of its compound rows' days. */
export async function deleteIndexRows(db: Db, type: string, id: string, owned: boolean): Promise<void> {
  await deleteIndexRowsOf(db, type, [id], owned);
}

/** deleteIndexRows for many resources of one type, all with an owner or all without: one statement. */
export async function deleteIndexRowsOf(db: Db, type: string, ids: string[], owned: boolean): Promise<void> {
  const params: unknown[] = [type, ids];
  const ctes = INDEX_TABLES.map((t, i) => `del${i} AS (DELETE FROM ${t.table} WHERE resource_type = $1 AND id = ANY($2::text[])${t === COMPOUND && windowed(type) ? ' RETURNING ref, during' : ''})`);
  if (windowed(type)) ctes.push(generationCte(params, `del${INDEX_TABLES.indexOf(COMPOUND)}`, [], owned));
  await db.query(`WITH ${ctes.join(', ')} SELECT 1`, params);
}

/**
 * Inserts the index rows of many new resources without an owner (`Repository.bulkLoad`), in one
 * statement: per table one INSERT from arrays with the type and id of each row, and the raised
 * generations of every (type, reference, day) their compound rows fall in.
 */
export async function insertIndexRows(db: Db, resources: { type: string; id: string; index: WritableIndexRows }[]): Promise<void> {
  const params: unknown[] = [];
  if (resources.some((r) => r.index.tokenValueIds.some((id) => id === undefined))) throw new Error('insertIndexRows: token values without an id (writableRows resolves them)');
  const ctes = INDEX_TABLES.map((t) => {
    const rows = resources.flatMap((r) => t.rows(r.index).map((row) => [r.type, r.id, ...row]));
    const first = pushColumns(params, t.columns.length + 2, rows);
    const names = ['resource_type', 'id', ...t.columns.map(([c]) => c)];
    return `ins_${t.name} AS (INSERT INTO ${t.table} (${names.join(', ')}) SELECT * FROM ${unnestRows(['text', 'text', ...t.columns.map(([, type]) => type)], first)})`;
  });
  const windows = new Map<string, [string, string, number]>();
  for (const r of resources) {
    for (const c of r.index.compounds) windows.set(`${r.type}|${c.ref}|${generationDay(c.range.low)}`, [r.type, c.ref, generationDay(c.range.low)]);
  }
  const days = [...windows.values()];
  const first = pushColumns(params, 3, days);
  ctes.push(`gen AS (INSERT INTO search_generation (resource_type, ref, day, generation)
    SELECT g.t, g.ref, g.day, 1 FROM unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::int[]) AS g(t, ref, day) ORDER BY g.t, g.ref, g.day
    ON CONFLICT (resource_type, ref, day) DO UPDATE SET generation = search_generation.generation + 1)`);
  await db.query(`WITH ${ctes.join(',\n')} SELECT 1`, params);
}

/**
 * The CTE raising the generation (migrations/004) of every (reference, day) whose compound rows a
 * write removes (`removed`: a CTE returning `ref, during`) or adds, and keeping its count of owned
 * rows (an owner never changes, so the written resource's `owned` says it for both): part of the
 * write's own statement, so it commits or rolls back with it. Rows are locked in one order.
 */
function generationCte(params: unknown[], removed: string | undefined, added: CompoundRow[], owned: boolean): string {
  params.push(added.map((c) => c.ref), added.map((c) => generationDay(c.range.low)));
  const fresh = `SELECT a.ref, a.day, 1 AS n FROM unnest($${params.length - 1}::text[], $${params.length}::int[]) AS a(ref, day)`;
  const old = removed ? `SELECT ref, floor(extract(epoch FROM lower(during)) / 86400)::int AS day, -1 AS n FROM ${removed} WHERE isfinite(lower(during)) UNION ALL ` : '';
  return `gen AS (INSERT INTO search_generation (resource_type, ref, day, generation, owned)
    SELECT $1, g.ref, g.day, 1, ${owned ? 'sum(g.n)' : '0'} FROM (${old}${fresh}) g GROUP BY g.ref, g.day ORDER BY g.ref, g.day
    ON CONFLICT (resource_type, ref, day) DO UPDATE SET generation = search_generation.generation + 1, owned = search_generation.owned + EXCLUDED.owned)`;
}

/**
 * The generation CTE of a new version of a stored resource: every (reference, day) of its compound
 * rows before and after is raised once; its owned count goes down by the rows removed and up by
 * the rows added (each a CTE returning `ref, during`).
 */
function changedGenerationCte(rows: { before: string; removed: string; added: string }, owned: boolean): string {
  const day = (from: string, n: number) => `SELECT ref, floor(extract(epoch FROM lower(during)) / 86400)::int AS day, ${n} AS n FROM ${from} WHERE isfinite(lower(during))`;
  return `gen AS (INSERT INTO search_generation (resource_type, ref, day, generation, owned)
    SELECT $1, g.ref, g.day, 1, ${owned ? 'sum(g.n)' : '0'} FROM (${day(rows.before, 0)} UNION ALL ${day(rows.removed, -1)} UNION ALL ${day(rows.added, 1)}) g GROUP BY g.ref, g.day ORDER BY g.ref, g.day
    ON CONFLICT (resource_type, ref, day) DO UPDATE SET generation = search_generation.generation + 1, owned = search_generation.owned + EXCLUDED.owned)`;
}
