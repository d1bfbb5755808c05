import type { Db } from '../db';
import type { TokenRow } from './extract';

/** A stored token value as a statement returns it (search_token_value, migrations/008). */
export interface TokenValueRow {
  value_id: number;
  param: string;
  system: string;
  code: string;
}

/**
 * The ids of token values (`search_token_value`, migrations/008): each distinct (param, system,
 * code) is stored once and a resource's token rows name it by id.
 *
 * Ids of committed values are kept in memory: a value is never deleted nor changed, so an id once
 * seen committed stays right for the life of the store, on every replica. Nearly every write
 * (a Slot's status, service and profile) then writes ids it already knows. A value first written
 * by a transaction is kept only after its commit: a rollback takes the row back.
 *
 * Two ways to learn ids: a version's write statement inserts the values it has no id for itself
 * and returns their ids (index-writer.ts, `learn`), so it needs no statement of its own; a bulk
 * load asks for all of a chunk's values in one statement first (`ids`). Either inserts new values
 * in one order (`valueOrder`), so two writers that add the same new values wait for each other in
 * that order and never deadlock over them.
 */
export class TokenValues {
  private readonly known = new Map<string, number>();
  /** Ids a transaction inserted or locked, until it commits (per transaction Db). */
  private readonly pending = new WeakMap<Db, Map<string, number>>();

  constructor(private readonly limit = 100_000) {}

  /** The id of each token row's value where this process knows it (committed, or this transaction's own). */
  idsKnown(db: Db, tokens: readonly TokenRow[]): (number | undefined)[] {
    const mine = this.pending.get(db);
    return tokens.map((t) => {
      const key = valueKey(t);
      return this.known.get(key) ?? mine?.get(key);
    });
  }

  /** The values a write statement returned: known to this transaction now, to every writer once it commits. */
  learn(db: Db, rows: readonly TokenValueRow[]): void {
    for (const row of rows) this.remember(db, valueKey(row), row.value_id);
  }

  /**
   * The id of every token row's value, inserting the values not stored yet: one statement for
   * those this process does not know. Its read sees the store as the statement began, so a value
   * another transaction committed meanwhile is neither inserted (the key conflicts) nor read: a
   * second statement, which sees it, asks for it again.
   */
  async ids(db: Db, tokens: readonly TokenRow[]): Promise<number[]> {
    const known = this.idsKnown(db, tokens);
    const missing = new Map<string, TokenRow>();
    tokens.forEach((t, k) => {
      if (known[k] === undefined) missing.set(valueKey(t), t);
    });
    // What this call fetched is read from its own answer: the bounded memory may forget an id
    // while another chunk's statement runs (bulk loads write chunks side by side).
    const fetched = missing.size > 0 ? await this.fetch(db, [...missing.values()]) : undefined;
    const mine = this.pending.get(db);
    return tokens.map((t, k) => {
      const key = valueKey(t);
      return known[k] ?? fetched?.get(key) ?? mine?.get(key) ?? this.known.get(key) ?? unresolved(key);
    });
  }

  /** Inserts or reads the wanted values; the ids found, by value. */
  private async fetch(db: Db, wanted: TokenRow[]): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    const columns = wanted.map(tokenValueColumns).sort(valueOrder);
    const params = [0, 1, 2, 3, 4].map((k) => columns.map((c) => c[k]));
    const { rows } = await db.query<TokenValueRow & { created: boolean }>(
      `WITH u AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(param, system, code, system_full, code_full, n)),
       ins AS (INSERT INTO search_token_value (param, system, code, system_full, code_full)
               SELECT param, system, code, system_full, code_full FROM u ORDER BY n
               ON CONFLICT (param, code, system) DO NOTHING
               RETURNING value_id, param, system, code)
       SELECT value_id, param, system, code, true AS created FROM ins
       UNION ALL
       SELECT v.value_id, v.param, v.system, v.code, false FROM search_token_value v JOIN u ON v.param = u.param AND v.code = u.code AND v.system = u.system`,
      params,
      { prepare: true },
    );
    for (const row of rows) {
      const key = valueKey(row);
      found.set(key, row.value_id);
      if (row.created) this.remember(db, key, row.value_id);
      else this.keep(key, row.value_id);
    }
    if (rows.length < wanted.length) {
      // Committed by another transaction after this statement began: visible to the next one.
      const { rows: late } = await db.query<TokenValueRow>(
        `SELECT v.value_id, v.param, v.system, v.code FROM search_token_value v
           JOIN unnest($1::text[], $2::text[], $3::text[]) AS u(param, system, code) ON v.param = u.param AND v.code = u.code AND v.system = u.system`,
        params.slice(0, 3),
      );
      for (const row of late) {
        found.set(valueKey(row), row.value_id);
        this.keep(valueKey(row), row.value_id);
      }
    }
    return found;
  }

  private remember(db: Db, key: string, id: number): void {
    if (!db.inTransaction) {
      this.keep(key, id);
      return;
    }
    let mine = this.pending.get(db);
    if (!mine) {
      mine = new Map();
      this.pending.set(db, mine);
      const own = mine;
      db.afterCommit(() => {
        for (const [k, v] of own) this.keep(k, v);
      });
    }
    mine.set(key, id);
  }

  private keep(key: string, id: number): void {
    // Bounded, least recently kept first out: identifiers (one value per patient) would otherwise
    // fill it, while the few values every Slot names stay; a forgotten id is asked for again.
    if (!this.known.delete(key) && this.known.size >= this.limit) this.known.delete(this.known.keys().next().value as string);
    this.known.set(key, id);
  }
}

/** A token row's value as search_token_value stores it: an absent system or code is ''. */
export function tokenValueColumns(t: TokenRow): [param: string, system: string, code: string, systemFull: string | null, codeFull: string | null] {
  return [t.param, t.system ?? '', t.code ?? '', t.systemFull ?? null, t.codeFull ?? null];
}

/** The order new values are inserted in, by every writer: the unique key's (param, code, system). */
export function valueOrder(a: readonly (string | null)[], b: readonly (string | null)[]): number {
  for (const k of [0, 2, 1]) {
    if (a[k]! < b[k]!) return -1;
    if (a[k]! > b[k]!) return 1;
  }
  return 0;
}

/** One string per stored value (param, system, code), absent system or code as ''. */
function valueKey(t: { param: string; system: string | null; code: string | null }): string {
  return `${t.param}\u0000${t.system ?? ''}\u0000${t.code ?? ''}`;
}

function unresolved(key: string): never {
  throw new Error(`token value ${key.replace(/\u0000/g, '|')} has no id after it was written`);
}
