import { TickBatch } from '../../server-lib/group-commit';
import type { Db } from '../db';

type Row = Record<string, unknown>;

/** Batches kept apart per statement text; more texts than this and the table starts over. */
const MAX_TEXTS = 200;

/**
 * Read statements of one text asked for by many requests at once, run as one statement (issue
 * 15): on this 2-core machine a statement's socket write, which wakes a database backend, costs
 * the server about as much as the statement's own work, and a search sends one per request.
 * The statements asked for in one turn of the event loop go out together: the text is run once
 * per parameter set, `CROSS JOIN LATERAL` over the parameter sets unnested, and the rows
 * are handed back per caller in the statement's own order (`order`, a column of its rows). A
 * batch starts after every request in it asked, so it reads what a statement of its own would.
 *
 * A batch of one runs the statement itself. Parameters must be text, integers or booleans (their
 * arrays are typed from the values); others run alone, and so does a text whose batched form the
 * database refused (a parameter whose type it had inferred from its place in the statement): the
 * requests of that batch then run one by one, and the text is not batched again.
 */
export class BatchedReads {
  private readonly groups = new Map<string, TickBatch<unknown[], Row[]>>();
  private readonly alone = new Set<string>();

  constructor(private readonly db: Db) {}

  async query<T extends Row>(sql: string, params: unknown[], order: string): Promise<T[]> {
    const types = params.map(sqlType);
    if (types.some((t) => t === undefined) || this.alone.has(sql)) return this.one<T>(sql, params);
    const key = `${types.join(',')}\u0000${sql}`;
    let group = this.groups.get(key);
    if (!group) {
      if (this.groups.size >= MAX_TEXTS) this.groups.clear();
      group = new TickBatch<unknown[], Row[]>((batch) => this.run(sql, types as string[], order, batch));
      this.groups.set(key, group);
    }
    return (await group.submit(params)) as T[];
  }

  private async one<T extends Row>(sql: string, params: unknown[]): Promise<T[]> {
    return (await this.db.query<T>(sql, params, { prepare: true })).rows;
  }

  private async run(sql: string, types: string[], order: string, batch: unknown[][]): Promise<Row[][]> {
    if (batch.length === 1) return [await this.one(sql, batch[0])];
    let rows: (Row & { batch_n: unknown })[];
    try {
      const columns = types.map((_type, k) => batch.map((params) => params[k]));
      rows = (await this.db.query<Row & { batch_n: unknown }>(batchedSql(sql, types, order), columns, { prepare: true })).rows;
    } catch (err) {
      // Class 42 (syntax error or access rule violation): the batched form itself is wrong for
      // this text. Anything else (a timeout, the store away) is every caller's answer: asked
      // again one by one, each would wait as long once more.
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('42')) throw err;
      this.alone.add(sql);
      return Promise.all(batch.map((params) => this.one(sql, params)));
    }
    const out: Row[][] = batch.map(() => []);
    for (const { batch_n: n, ...row } of rows) out[Number(n) - 1].push(row);
    return out;
  }
}

/** One BatchedReads per store (outside transactions: a transaction's statements are its own). */
const perDb = new WeakMap<Db, BatchedReads>();

export function batchedReads(db: Db): BatchedReads {
  let reads = perDb.get(db);
  if (!reads) {
    reads = new BatchedReads(db);
    perDb.set(db, reads);
  }
  return reads;
}

/** `sql` once per row of the unnested parameter arrays (`$k` becomes that row's `b.pk`). */
export function batchedSql(sql: string, types: string[], order: string): string {
  const columns = types.map((_, k) => `p${k + 1}`);
  const arrays = types.map((t, k) => `$${k + 1}::${t}[]`);
  const inner = sql.replace(/\$(\d+)/g, (_, k: string) => `b.p${k}`);
  return `SELECT b.n AS batch_n, s.* FROM unnest(${arrays.join(', ')}) WITH ORDINALITY AS b(${[...columns, 'n'].join(', ')}) CROSS JOIN LATERAL (${inner}) s ORDER BY b.n, s.${order}`;
}

function sqlType(value: unknown): string | undefined {
  if (typeof value === 'string') return 'text';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number' && Number.isSafeInteger(value)) return 'bigint';
  return undefined;
}
