import type { Resource, Slot } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { parseSearch } from '../../src/fhir/search-request';
import { buildDeferredIndexes, migrate, SEARCH_TABLES, withIndexesBuiltAfter, type Db } from '../../src/store';
import { Repository } from '../../src/store/repository';
import { createTestContext } from '../helpers/context';

/**
 * A load into an empty store may drop the search tables' secondary indexes and build them after
 * (src/store/deferred-indexes.ts). What must hold: the same indexes come back, with the same
 * definitions, after a load that succeeds, one that fails, and one whose process was killed (the
 * next migration run builds them); constraints stay throughout; a store with data is refused; the
 * loaded resources are found.
 */
const TABLES = [...SEARCH_TABLES, 'booking_slot'];

async function indexes(db: Db): Promise<string[]> {
  const { rows } = await db.query<{ def: string }>(
    `SELECT pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = current_schema() AND t.relname = ANY($1::text[]) ORDER BY 1`,
    [TABLES],
  );
  return rows.map((r) => r.def);
}

const slot = (n: number): Slot => ({
  resourceType: 'Slot',
  id: `di-${n}`,
  schedule: { reference: 'Schedule/di-cal' },
  status: 'free',
  start: new Date(Date.UTC(2031, 6, 1, 8) + n * 900_000).toISOString(),
  end: new Date(Date.UTC(2031, 6, 1, 8) + (n + 1) * 900_000).toISOString(),
  serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '124' }] }],
});

describe('indexes built after a load into an empty store', () => {
  let ctx: AppContext;
  let repo: Repository;
  let before: string[];
  beforeAll(async () => {
    ctx = await createTestContext();
    repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
    before = await indexes(ctx.db);
  });
  afterAll(() => ctx.db.close());

  test('during the load the secondary indexes are gone and listed, constraints stay; after it they are back as they were', async () => {
    expect(before.some((d) => d.includes('search_token_row_lookup'))).toBe(true);
    let during: string[] = [];
    let listed = 0;
    await withIndexesBuiltAfter(ctx.db, TABLES, async () => {
      during = await indexes(ctx.db);
      listed = Number((await ctx.db.query<{ n: string }>('SELECT count(*) AS n FROM deferred_index')).rows[0].n);
      await repo.bulkLoad(Array.from({ length: 40 }, (_, n) => slot(n)) as Resource[], 10);
    });
    // What stays: unique indexes and those behind constraints (the primary keys, booking_slot's).
    expect(during.every((d) => d.startsWith('CREATE UNIQUE INDEX') || /_pkey |_no_overlap /.test(d))).toBe(true);
    expect(during.some((d) => d.includes('resource_pkey'))).toBe(true);
    expect(listed).toBe(before.length - during.length);
    expect(listed).toBeGreaterThanOrEqual(15);
    expect(await indexes(ctx.db)).toEqual(before);
    expect((await ctx.db.query('SELECT 1 FROM deferred_index')).rows).toEqual([]);
    const found = await repo.search(parseSearch('Slot', [['schedule', 'Schedule/di-cal'], ['status', 'free'], ['start', 'ge2031-07-01T09:00:00Z'], ['start', 'lt2031-07-01T10:00:00Z']]).request);
    expect(found.matches.map((m) => m.id).sort()).toEqual(['di-4', 'di-5', 'di-6', 'di-7']);
  });

  test('a store that holds resources is refused, and keeps its indexes', async () => {
    await expect(withIndexesBuiltAfter(ctx.db, TABLES, async () => undefined)).rejects.toThrow('only into an empty store');
    expect(await indexes(ctx.db)).toEqual(before);
  });

  test('a load that fails still gets its indexes back, and its error goes to the caller', async () => {
    const empty = await createTestContext();
    try {
      const own = await indexes(empty.db);
      await expect(
        withIndexesBuiltAfter(empty.db, TABLES, async () => {
          throw new Error('the load broke');
        }),
      ).rejects.toThrow('the load broke');
      expect(await indexes(empty.db)).toEqual(own);
    } finally {
      await empty.db.close();
    }
  });

  test('a load whose process was killed leaves its list, and the next migration run builds what is on it', async () => {
    const empty = await createTestContext();
    try {
      const own = await indexes(empty.db);
      // What a killed load leaves: the definitions listed, the indexes dropped.
      const dropped = ['search_token_row_lookup', 'search_compound_window', 'booking_slot_free_ends'];
      await empty.db.transaction(async (tx) => {
        for (const name of dropped) {
          const def = own.find((d) => d.startsWith(`CREATE INDEX ${name} `))!;
          await tx.query('INSERT INTO deferred_index (name, definition) VALUES ($1, $2)', [name, def]);
          await tx.query(`DROP INDEX ${name}`);
        }
      });
      expect((await indexes(empty.db)).length).toBe(own.length - dropped.length);
      await migrate(empty.db);
      expect(await indexes(empty.db)).toEqual(own);
      expect(await buildDeferredIndexes(empty.db)).toEqual([]);
    } finally {
      await empty.db.close();
    }
  });
});
