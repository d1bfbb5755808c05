import type { Slot } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { Repository } from '../../src/store/repository';
import { generationDay } from '../../src/store/search/index-writer';
import { parseSearch } from '../../src/fhir/search-request';
import { createTestContext } from '../helpers/context';

/**
 * A new version rewrites only the index rows that change. Rows are told apart by their
 * physical address (ctid): a row left in place keeps it, a rewritten one gets a new one.
 */
describe('index rows of a new version', () => {
  let ctx: AppContext;
  let repo: Repository;
  beforeAll(async () => {
    ctx = await createTestContext();
    repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
  });
  afterAll(() => ctx.db.close());

  const slot = (status: Slot['status'], more: Partial<Slot> = {}): Slot => ({
    resourceType: 'Slot',
    id: 'ir-1',
    schedule: { reference: 'Schedule/ir-s' },
    status,
    start: '2031-03-03T08:00:00Z',
    end: '2031-03-03T08:15:00Z',
    serviceType: [{ coding: [{ system: 'urn:test', code: 'a' }] }],
    ...more,
  });

  /** Each index row of the Slot as `table param value` → ctid. */
  const rows = async (): Promise<Record<string, string>> => {
    const { rows: found } = await ctx.db.query<{ k: string; ctid: string }>(
      `SELECT 'token ' || v.param || ' ' || v.code AS k, t.ctid::text AS ctid FROM search_token_row t JOIN search_token_value v ON v.value_id = t.value_id WHERE t.resource_type = 'Slot' AND t.id = 'ir-1'
       UNION ALL SELECT 'reference ' || param || ' ' || target_url, ctid::text FROM search_reference WHERE resource_type = 'Slot' AND id = 'ir-1'
       UNION ALL SELECT 'date ' || param || ' ' || to_char(low AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'), ctid::text FROM search_date WHERE resource_type = 'Slot' AND id = 'ir-1'
       UNION ALL SELECT 'compound ' || code || ' ' || to_char(lower(during) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'), ctid::text FROM search_compound WHERE resource_type = 'Slot' AND id = 'ir-1'`,
    );
    const out: Record<string, string> = {};
    for (const r of found) {
      expect(out[r.k]).toBeUndefined(); // no row twice
      out[r.k] = r.ctid;
    }
    return out;
  };
  const generation = async (iso: string) =>
    Number(
      (await ctx.db.query<{ g: number }>(`SELECT generation AS g FROM search_generation WHERE resource_type = 'Slot' AND ref = 'Schedule/ir-s' AND day = $1`, [generationDay(Date.parse(iso))])).rows[0]?.g ?? 0,
    );
  const found = async (query: [string, string][]) => (await repo.search(parseSearch('Slot', query).request)).matches.map((m) => m.id);

  test('a booked slot rewrites its status rows and keeps the others; a change outside the index keeps all', async () => {
    await repo.update(slot('free'));
    const free = await rows();
    expect(Object.keys(free).sort()).toEqual(['compound free 2031-03-03T08:00', 'date start 2031-03-03T08:00', 'reference schedule Schedule/ir-s', 'token service-type a', 'token status free']);
    const g1 = await generation('2031-03-03T08:00:00Z');

    await repo.update(slot('busy'));
    const busy = await rows();
    expect(Object.keys(busy).sort()).toEqual(['compound busy 2031-03-03T08:00', 'date start 2031-03-03T08:00', 'reference schedule Schedule/ir-s', 'token service-type a', 'token status busy']);
    for (const kept of ['date start 2031-03-03T08:00', 'reference schedule Schedule/ir-s', 'token service-type a']) expect(busy[kept]).toBe(free[kept]);
    expect(await generation('2031-03-03T08:00:00Z')).toBe(g1 + 1);
    const window: [string, string][] = [
      ['schedule', 'Schedule/ir-s'],
      ['start', 'ge2031-03-03T00:00:00Z'],
      ['start', 'le2031-03-03T23:59:59Z'],
    ];
    expect(await found([...window, ['status', 'busy']])).toEqual(['ir-1']);
    expect(await found([...window, ['status', 'free']])).toEqual([]);

    // Nothing indexed changes: every row stays, and the day's generation still rises (its cached results hold the content).
    await repo.update(slot('busy', { comment: 'called in sick' }));
    expect(await rows()).toEqual(busy);
    expect(await generation('2031-03-03T08:00:00Z')).toBe(g1 + 2);
  });

  test('a slot moved to another day leaves the old day and raises both days', async () => {
    await repo.update(slot('free', { id: 'ir-2' } as Partial<Slot>));
    const before = [await generation('2031-03-03T08:00:00Z'), await generation('2031-03-05T08:00:00Z')];
    await repo.update(slot('free', { id: 'ir-2', start: '2031-03-05T08:00:00Z', end: '2031-03-05T08:15:00Z' } as Partial<Slot>));
    expect([await generation('2031-03-03T08:00:00Z'), await generation('2031-03-05T08:00:00Z')]).toEqual([before[0] + 1, before[1] + 1]);
    const day = (d: string): [string, string][] => [
      ['schedule', 'Schedule/ir-s'],
      ['start', `ge${d}T00:00:00Z`],
      ['start', `le${d}T23:59:59Z`],
    ];
    expect(await found(day('2031-03-03'))).not.toContain('ir-2');
    expect(await found(day('2031-03-05'))).toEqual(['ir-2']);
    const { rows: dates } = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM search_date WHERE resource_type = 'Slot' AND id = 'ir-2'`);
    expect(dates[0].n).toBe(1);
  });
});
