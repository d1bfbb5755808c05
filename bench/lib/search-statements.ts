import type { Caller } from '../../src/common/identity';
import { parseSearch } from '../../src/fhir/search-request';
import type { Db } from '../../src/store/db';
import { executeSearch } from '../../src/store/search/sql';

/** A captured statement: its text and values. */
export interface Statement {
  text: string;
  values: unknown[];
}

/**
 * The statements the store's search sends for `Slot?<pairs>` as `scope` sees it, built by the
 * store's own SQL builder against a Db that only records them (nothing runs).
 */
export async function slotSearchStatements(pairs: [string, string][], opts: { scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>; baseUrl: string }): Promise<Statement[]> {
  const sql: Statement[] = [];
  const capture = {
    kind: 'pg',
    inTransaction: false,
    query: async (text: string, values: unknown[] = []) => {
      sql.push({ text, values });
      return { rows: [], rowCount: 0 };
    },
  } as unknown as Db;
  await executeSearch(capture, parseSearch('Slot', pairs).request, { scope: opts.scope, now: new Date(), baseUrl: opts.baseUrl });
  return sql;
}
