import { runFuzz, startFuzzTarget, type FuzzTarget } from './fuzz/run';

/**
 * Issue 16: the seeded fuzzer (test/fuzz/cases.ts) against the server on this project's store,
 * 2,000 cases from each of three seeds that found 500s before their causes were fixed. No case
 * may answer 5xx, leave a request unanswered, or answer an error in another shape than an
 * OperationOutcome or the guard's error object. `npm run fuzz` runs 10,000 per store.
 */
describe('fuzzed requests', () => {
  let target: FuzzTarget;
  beforeAll(async () => {
    target = await startFuzzTarget({ pglite: !process.env.DATABASE_URL });
  });
  afterAll(() => target?.close());

  test.each([2, 3, 4])('seed %i: 2,000 cases, no 5xx and every error in its documented shape', async (seed) => {
    const report = await runFuzz(target, { seed, cases: 2000 });
    expect(report.findings).toEqual([]);
    // The cases reach past the front door: reads, writes and refusals of every kind.
    expect(Object.keys(report.byStatus)).toEqual(expect.arrayContaining(['200', '201', '400', '401', '404', '422']));
  });
});
