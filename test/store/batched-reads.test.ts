import { BatchedReads, batchedSql } from '../../src/store/search/batched-reads';
import { createTestContext } from '../helpers/context';
import { statementRecorder } from '../helpers/statements';

/**
 * Read statements of one text asked for at the same moment run as one statement, and
 * each caller gets its own rows in its own order. On the store of the project (PostgreSQL, PGlite).
 */
let ctx: Awaited<ReturnType<typeof createTestContext>>;
const recorder = statementRecorder();

beforeAll(async () => {
  ctx = await createTestContext();
  recorder.start();
});
afterAll(async () => {
  recorder.stop();
  await ctx.db.close();
});

const SERIES = 'SELECT $1::text AS label, g AS pos FROM generate_series($2::int, $3::int) g ORDER BY g DESC';

test('statements of one text at the same moment: one statement, each caller its own rows in its own order; a lone one runs as written', async () => {
  const reads = new BatchedReads(ctx.db);
  recorder.sent.length = 0;
  const answers = await Promise.all([
    reads.query<{ label: string; pos: number }>(SERIES, ['a', 1, 3], 'pos'),
    reads.query<{ label: string; pos: number }>(SERIES, ['b', 5, 4], 'pos'), // no rows
    reads.query<{ label: string; pos: number }>(SERIES, ['c', 7, 8], 'pos'),
  ]);
  expect(answers.map((rows) => rows.map((r) => `${r.label}${r.pos}`))).toEqual([['a1', 'a2', 'a3'], [], ['c7', 'c8']]);
  expect(recorder.sent).toEqual([batchedSql(SERIES, ['text', 'bigint', 'bigint'], 'pos')]);
  recorder.sent.length = 0;
  expect((await reads.query<{ pos: number }>(SERIES, ['d', 2, 2], 'pos')).map((r) => Number(r.pos))).toEqual([2]);
  expect(recorder.sent).toEqual([SERIES]);
});

test('a text whose batched form the database refuses answers each caller from its own statement, and runs alone from then on', async () => {
  const reads = new BatchedReads(ctx.db);
  // `$1 + 1`: the statement itself types $1 from its place (integer); the batched form has text there.
  const sum = 'SELECT $1 + 1 AS x, 1 AS pos';
  recorder.sent.length = 0;
  const first = await Promise.all(['41', '1'].map((v) => reads.query<{ x: number }>(sum, [v], 'pos')));
  expect(first.map((rows) => Number(rows[0].x))).toEqual([42, 2]);
  expect(recorder.sent).toEqual([batchedSql(sum, ['text'], 'pos'), sum, sum]);
  recorder.sent.length = 0;
  const again = await Promise.all(['5', '6'].map((v) => reads.query<{ x: number }>(sum, [v], 'pos')));
  expect(again.map((rows) => Number(rows[0].x))).toEqual([6, 7]);
  expect(recorder.sent).toEqual([sum, sum]);
});

test('a batch that fails for another reason (here a division by zero) answers every caller with its error, without asking again one by one', async () => {
  const reads = new BatchedReads(ctx.db);
  const div = 'SELECT 1 / $1::int AS x, 1 AS pos';
  recorder.sent.length = 0;
  const answers = await Promise.allSettled([reads.query(div, [0], 'pos'), reads.query(div, [0], 'pos')]);
  expect(answers.map((a) => a.status)).toEqual(['rejected', 'rejected']);
  expect(recorder.sent).toEqual([batchedSql(div, ['bigint'], 'pos')]);
});

test('parameters that are neither text, integers nor booleans run alone', async () => {
  const reads = new BatchedReads(ctx.db);
  const any = 'SELECT $1::text[] AS xs, 1 AS pos';
  recorder.sent.length = 0;
  const rows = await Promise.all([reads.query<{ xs: string[] }>(any, [['a', 'b']], 'pos'), reads.query<{ xs: string[] }>(any, [['c']], 'pos')]);
  expect(rows.map((r) => r[0].xs)).toEqual([['a', 'b'], ['c']]);
  expect(recorder.sent).toEqual([any, any]);
});
