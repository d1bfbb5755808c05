import type { Patient, Resource, Slot } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { Repository } from '../../src/store/repository';
import { generationDay } from '../../src/store/search/index-writer';
import { indexKey } from '../../src/store/search/index-key';
import { createTestContext } from '../helpers/context';

/**
 * The search tables have one writer (store/search/index-writer.ts) with three paths: a version's
 * write statement, a deletion, and bulkLoad. A resource loaded in bulk must have exactly the index
 * rows, in every column (the `*_full` ones of long values too), that a create writes; a deletion
 * must leave none; and both must raise the generation of the compound rows' days.
 */
describe('index writer: bulk load, write and delete keep the same rows', () => {
  let ctx: AppContext;
  let repo: Repository;
  beforeAll(async () => {
    ctx = await createTestContext();
    repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
  });
  afterAll(() => ctx.db.close());

  // Longer than an index key keeps (index-key.ts): the write must fill code_full, system_full and norm_full.
  const longCode = `code-${'ä'.repeat(200)}`;
  const longSystem = `urn:test:${'s'.repeat(300)}`;
  const longFamily = `Nachname-${'ö'.repeat(300)}`;

  const slot = (id: string): Slot => ({
    resourceType: 'Slot',
    id,
    schedule: { reference: 'Schedule/iw-cal' },
    status: 'free',
    start: '2031-06-02T08:00:00Z',
    end: '2031-06-02T08:15:00Z',
    serviceType: [{ coding: [{ system: longSystem, code: longCode }] }, { coding: [{ system: 'urn:test', code: 'short' }] }],
  });
  const patient = (id: string): Patient => ({
    resourceType: 'Patient',
    id,
    identifier: [{ system: longSystem, value: longCode }],
    name: [{ family: longFamily, given: ['Erika'] }],
    birthDate: '1970-01-01',
    generalPractitioner: [{ reference: 'Practitioner/iw-doc' }],
  });

  const TABLES = {
    search_token: 'param, system, code, system_full, code_full',
    search_reference: 'param, target_type, target_id, target_url',
    search_date: 'param, low, high',
    search_string: 'param, norm, exact, norm_full',
    search_compound: 'ref, code, during',
    search_token_date: 'system, code, during',
  };

  /** Every index row of one resource, per table, as sorted JSON lines without its id. */
  const indexRows = async (r: Resource): Promise<Record<string, string[]>> => {
    const out: Record<string, string[]> = {};
    for (const [table, columns] of Object.entries(TABLES)) {
      const { rows } = await ctx.db.query<{ row: string }>(
        `SELECT row_to_json(x)::text AS row FROM (SELECT ${columns} FROM ${table} WHERE resource_type = $1 AND id = $2) x`,
        [r.resourceType, r.id],
      );
      out[table] = rows.map((x) => x.row).sort();
    }
    return out;
  };

  const generation = async () =>
    Number(
      (await ctx.db.query<{ g: string }>(`SELECT generation AS g FROM search_generation WHERE resource_type = 'Slot' AND ref = 'Schedule/iw-cal' AND day = $1`, [generationDay(Date.parse('2031-06-02T08:00:00Z'))]))
        .rows[0]?.g ?? 0,
    );

  test('a resource loaded in bulk has the rows a create writes, long values with their full column', async () => {
    const before = await generation();
    await repo.bulkLoad([slot('iw-bulk'), patient('iw-bulk')]);
    const afterBulk = await generation();
    expect(afterBulk).toBe(before + 1);
    await repo.update(slot('iw-write'));
    await repo.update(patient('iw-write'));
    expect(await generation()).toBe(afterBulk + 1);

    for (const type of ['Slot', 'Patient'] as const) {
      const bulk = await indexRows({ resourceType: type, id: 'iw-bulk' } as Resource);
      const written = await indexRows({ resourceType: type, id: 'iw-write' } as Resource);
      expect(bulk).toEqual(written);
    }
    const slotRows = await indexRows({ resourceType: 'Slot', id: 'iw-bulk' } as Slot);
    expect(slotRows.search_compound).toHaveLength(1);
    // Its two service types, each with its start; the long system and code as their bounded keys.
    expect(slotRows.search_token_date).toHaveLength(2);
    expect(slotRows.search_token_date.map((row) => JSON.parse(row).code)).toEqual(expect.arrayContaining(['short', indexKey(longCode)]));
    expect(slotRows.search_token.some((row) => JSON.parse(row).code_full === longCode && JSON.parse(row).system_full === longSystem)).toBe(true);
    const patientRows = await indexRows({ resourceType: 'Patient', id: 'iw-bulk' } as Patient);
    expect(patientRows.search_string.some((row) => JSON.parse(row).norm_full !== null)).toBe(true);
    expect(patientRows.search_reference).toHaveLength(1);
    expect(patientRows.search_date).toHaveLength(1);
    // A Patient has no compound index: no row there.
    expect(patientRows.search_compound).toEqual([]);
    expect(patientRows.search_token_date).toEqual([]);
  });

  test('a new version changes only what differs; a deletion leaves no index row and raises the generation', async () => {
    await repo.update({ ...slot('iw-write'), status: 'busy' });
    const busy = await indexRows(slot('iw-write'));
    expect(busy.search_token.filter((row) => JSON.parse(row).param === 'status').map((row) => JSON.parse(row).code)).toEqual(['busy']);
    expect(busy.search_compound.every((row) => JSON.parse(row).code === 'busy')).toBe(true);

    const before = await generation();
    for (const id of ['iw-bulk', 'iw-write']) {
      await repo.delete('Slot', id);
      await repo.delete('Patient', id);
      for (const r of [slot(id), patient(id)]) {
        const left = await indexRows(r);
        expect(Object.values(left).flat()).toEqual([]);
      }
    }
    expect(await generation()).toBe(before + 2);
  });
});
