/** SQL on the bench's store: the rows of a statement. */
export type Query = <T extends Record<string, unknown>>(sql: string, values?: unknown[]) => Promise<T[]>;

/**
 * Bytes of the Slot rows: each table's size (with its indexes and TOAST) shared out by the share
 * of its rows that belong to Slots. `samplePercent` reads the shares off a sample of each table's
 * pages (`TABLESAMPLE SYSTEM`) instead of every row: at ten million slots a full count takes minutes.
 */
export async function bytesOfSlots(query: Query, schema: string, slots: number, samplePercent?: number): Promise<number> {
  const sample = samplePercent ? ` TABLESAMPLE SYSTEM (${samplePercent}) REPEATABLE (7)` : '';
  const tables = await query<{ name: string; bytes: string; typed: boolean }>(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes,
            EXISTS (SELECT 1 FROM information_schema.columns k WHERE k.table_schema = $1 AND k.table_name = c.relname AND k.column_name = 'resource_type') AS typed
       FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r'`,
    [schema],
  );
  let total = 0;
  for (const t of tables) {
    if (t.name === 'booking_slot') total += Number(t.bytes);
    else if (t.name === 'search_token_value') {
      // Shared by every type: the share of the values Slots use.
      const rows = await query<{ share: number | null }>(
        `SELECT count(DISTINCT value_id) FILTER (WHERE resource_type = 'Slot')::float8 / nullif(count(DISTINCT value_id), 0) AS share FROM ${schema}.search_token_row${sample}`,
      );
      total += Number(t.bytes) * Number(rows[0].share ?? 0);
    } else if (t.typed && t.name !== 'search_generation') {
      const rows = await query<{ share: number | null }>(`SELECT avg((resource_type = 'Slot')::int) AS share FROM ${schema}.${t.name}${sample}`);
      total += Number(t.bytes) * Number(rows[0].share ?? 0);
    }
  }
  return total / slots;
}
