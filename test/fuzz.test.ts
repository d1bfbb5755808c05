import { SESSION_KINDS } from './fuzz/cases';
import { runFuzz, startFuzzTarget, type FuzzReport, type FuzzTarget } from './fuzz/run';

/**
 * The seeded fuzzer (test/fuzz/cases.ts) against the server on this project's store with
 * the guard enforcing, 2,000 cases from each of three seeds; every case through the enforcement
 * point with valid sessions of each kind (requestor, owner, patient, workload), a session with one
 * flaw, broken credentials or none. No case may answer 5xx, leave a request unanswered, answer an
 * error in another shape than an OperationOutcome or the guard's error object, or refuse a valid
 * session as unauthenticated. `npm run fuzz` runs 10,000 per store (`-- --cases 100000` for more).
 */
describe('fuzzed requests through the enforcing guard', () => {
  let target: FuzzTarget;
  beforeAll(async () => {
    target = await startFuzzTarget({ pglite: !process.env.DATABASE_URL });
  });
  afterAll(() => target?.close());

  const statuses = (report: FuzzReport, caller: string) => Object.keys(report.byCaller[caller] ?? {});

  test.each([2, 3, 4])('seed %i: 2,000 cases, no 5xx, every error in its documented shape, no valid session refused', async (seed) => {
    const report = await runFuzz(target, { seed, cases: 2000 });
    expect(report.findings).toEqual([]);
    expect(report.backgroundErrors).toEqual({ count: 0, first: [] });
    // The cases reach past the enforcement point: reads, writes and refusals of every kind.
    expect(Object.keys(report.byStatus)).toEqual(expect.arrayContaining(['200', '201', '400', '401', '403', '404', '422']));
    // Every session kind passes the enforcement point (200) and none is refused as unauthenticated;
    // the patient and the workload meet their scopes' limits (403).
    for (const kind of SESSION_KINDS) {
      expect(statuses(report, kind)).toContain('200');
      expect(statuses(report, kind)).not.toContain('401');
    }
    expect(statuses(report, 'patient')).toContain('403');
    expect(statuses(report, 'workload')).toContain('403');
    // Without credentials, or with broken ones, nothing passes.
    // (431: headers past Node's limit are refused before anyone reads them.)
    for (const caller of ['none', 'broken']) expect(statuses(report, caller).filter((s) => s !== '401' && s !== '431')).toEqual([]);
    expect(statuses(report, 'flawed')).toContain('401');
  });
});
