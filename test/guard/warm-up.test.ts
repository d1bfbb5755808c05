import { composeGuard } from '../../src/guard';
import { warmUpGuard } from '../../src/guard/warm-up';
import { openTables, type Db } from '../../src/store';
import { createTestContext } from '../helpers/context';

/**
 * Cold start: the guard's start-up rehearsal (signing key, body readers, the checks of a
 * throwaway institution card) finishes without a warning whatever CARD_OCSP says, and stores
 * nothing but the signing key; opening the tables reads nothing. Runs on the store of its project.
 */
test.each(['if-present', 'required', 'off'])('with CARD_OCSP=%s the warm-up completes quietly and stores only the signing key', async (mode) => {
  const ctx = await createTestContext({ env: { CARD_OCSP: mode } });
  try {
    const deps = composeGuard(ctx); // warns of the development card CA (no CARD_TRUST_ANCHORS here)
    const warn = jest.spyOn(ctx.logger, 'warn');
    const before = await rowCounts(ctx.db);
    await openTables(ctx.db);
    await warmUpGuard(deps);
    expect(warn).not.toHaveBeenCalled();
    const after = await rowCounts(ctx.db);
    expect(after.size).toBeGreaterThan(10);
    expect([...after].filter(([table, n]) => before.get(table) !== n).map(([table]) => table)).toEqual(['guard_signing_key']);
  } finally {
    await ctx.db.close();
  }
});

async function rowCounts(db: Db): Promise<Map<string, number>> {
  const { rows: tables } = await db.query<{ name: string }>(`SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`);
  const counts = new Map<string, number>();
  for (const { name } of tables) counts.set(name, Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${name}`)).rows[0].n));
  return counts;
}
