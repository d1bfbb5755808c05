import type { Slot } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { parseSearch } from '../../src/fhir/search-request';
import { Repository } from '../../src/store/repository';
import { TokenValues } from '../../src/store/search/token-values';
import { createTestContext } from '../helpers/context';

/**
 * Token values are stored once (search_token_value, migrations/008) and a writer keeps the ids it
 * has seen committed (store/search/token-values.ts). What must hold: resources with the same value
 * share its row; a value first written by a transaction that rolls back is not remembered; two
 * writers adding the same new value at once both index it; an absent system is found by `|code`.
 */
describe('token values: one row per value, ids safe across rollbacks and concurrent writers', () => {
  let ctx: AppContext;
  let repo: Repository;
  beforeAll(async () => {
    ctx = await createTestContext();
    repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
  });
  afterAll(() => ctx.db.close());

  const slot = (id: string, code: string, system?: string): Slot => ({
    resourceType: 'Slot',
    id,
    schedule: { reference: 'Schedule/tv-cal' },
    status: 'free',
    start: '2031-07-01T08:00:00Z',
    end: '2031-07-01T08:15:00Z',
    serviceType: [{ coding: [{ ...(system ? { system } : {}), code }] }],
  });
  const found = async (r: Repository, value: string) => (await r.search(parseSearch('Slot', [['service-type', value]]).request)).matches.map((m) => m.id).sort();
  const valueRows = async (code: string) =>
    Number((await ctx.db.query<{ n: string }>(`SELECT count(*) AS n FROM search_token_value WHERE param = 'service-type' AND code = $1`, [code])).rows[0].n);

  test('slots with the same service share one value row; `|code` finds the one without a system', async () => {
    await repo.update(slot('tv-a', 'shared', 'urn:tv'));
    await repo.update(slot('tv-b', 'shared', 'urn:tv'));
    await repo.bulkLoad([slot('tv-c', 'shared', 'urn:tv'), slot('tv-d', 'shared')]);
    expect(await valueRows('shared')).toBe(2); // with urn:tv, and without a system
    expect(await found(repo, 'urn:tv|shared')).toEqual(['tv-a', 'tv-b', 'tv-c']);
    expect(await found(repo, '|shared')).toEqual(['tv-d']);
    expect(await found(repo, 'shared')).toEqual(['tv-a', 'tv-b', 'tv-c', 'tv-d']);
    expect(await found(repo, 'urn:tv|')).toEqual(['tv-a', 'tv-b', 'tv-c']);
  });

  test('a value first written by a transaction that rolls back is written again by the next writer', async () => {
    await expect(
      repo.withTransaction(async (tx) => {
        await tx.update(slot('tv-rolled-back', 'rb-new', 'urn:tv'));
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await valueRows('rb-new')).toBe(0);
    // Same repository (same remembered ids): the value must be inserted again, not taken from memory.
    await repo.update(slot('tv-after', 'rb-new', 'urn:tv'));
    expect(await valueRows('rb-new')).toBe(1);
    expect(await found(repo, 'urn:tv|rb-new')).toEqual(['tv-after']);
    await repo.bulkLoad([slot('tv-after-bulk', 'rb-new', 'urn:tv')]);
    expect(await found(repo, 'urn:tv|rb-new')).toEqual(['tv-after', 'tv-after-bulk']);
  });

  test('ids asked for in one call are answered even when the bounded memory cannot hold them all', async () => {
    // A bulk load of 100,000 patients' identifiers fills the memory; the ids one call fetched must not
    // depend on what it still holds (two chunks load side by side, each keeping ids the other forgets).
    const values = new TokenValues(2);
    const tokens = ['m1', 'm2', 'm3', 'm4'].map((code) => ({ param: 'service-type', system: 'urn:tv-memory', code }));
    const first = await values.ids(ctx.db, tokens);
    expect(new Set(first).size).toBe(4);
    expect(await values.ids(ctx.db, [...tokens].reverse())).toEqual([...first].reverse());
    await ctx.db.transaction(async (tx) => {
      expect(await values.ids(tx, [...tokens, { param: 'service-type', system: 'urn:tv-memory', code: 'm5' }])).toEqual([...first, expect.any(Number)]);
    });
  });

  // PGlite has one connection: its writers never overlap.
  const onPostgres = process.env.DATABASE_URL ? test : test.skip;
  // A version's write inserts its new values in its own statement; a bulk load asks for them first.
  const writes: [string, (r: Repository, s: Slot) => Promise<unknown>][] = [
    ['a version\'s write', (r, s) => r.update(s)],
    ['a bulk load', (r, s) => r.bulkLoad([s])],
  ];
  onPostgres.each(writes)('two writers adding the same new value at once (%s): the second waits for the first and indexes its row', async (name, write) => {
    const code = `race-${name.length}`;
    const other = new Repository(ctx.db, 'http://localhost:8080/fhir');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let firstWrote!: () => void;
    const wrote = new Promise<void>((resolve) => (firstWrote = resolve));
    const first = repo.withTransaction(async (tx) => {
      await write(tx, slot(`${code}-first`, code, 'urn:tv'));
      firstWrote();
      await gate;
    });
    try {
      await wrote;
      const second = write(other, slot(`${code}-second`, code, 'urn:tv'));
      // The second's insert of the value waits on the first's uncommitted row.
      for (let waited = 0; ; waited++) {
        const { rows } = await ctx.db.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO search_token_value%'`,
        );
        if (Number(rows[0].n) > 0) break;
        if (waited > 600) throw new Error('the second writer never waited for the first');
        await new Promise((r) => setTimeout(r, 50));
      }
      release();
      await first;
      await second;
    } finally {
      release();
      await first.catch(() => undefined);
    }
    expect(await valueRows(code)).toBe(1);
    expect(await found(repo, `urn:tv|${code}`)).toEqual([`${code}-first`, `${code}-second`]);
    expect(await found(other, `urn:tv|${code}`)).toEqual([`${code}-first`, `${code}-second`]);
  });
});
