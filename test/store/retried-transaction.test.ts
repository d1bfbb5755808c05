import type { Db, QueryResult } from '../../src/store/db';
import { retriedTransaction, SqlState, TRANSIENT_STATES, type RetryOptions } from '../../src/store/db';

/** An error as the pg driver and PGlite report a statement's failure: the SQLSTATE in `code`. */
const sqlError = (code: string) => Object.assign(new Error(`failed with SQLSTATE ${code}`), { code });

/**
 * A Db that only counts transactions: enough for the retry rule, which looks at nothing but the
 * failure of a whole transaction and whether it was nested.
 */
function countingDb(inTransaction = false): Db & { opened: number } {
  const db = {
    kind: 'pg' as const,
    inTransaction,
    opened: 0,
    async query<T>(): Promise<QueryResult<T>> {
      return { rows: [], rowCount: 0 };
    },
    transaction<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
      db.opened++;
      return fn(db);
    },
    afterCommit: (fn: () => void) => fn(),
    close: async () => undefined,
  };
  return db;
}

/** Fails with the given SQLSTATEs in turn, then answers `done`. */
function failing(...states: string[]): () => Promise<string> {
  let run = 0;
  return async () => {
    const state = states[run++];
    if (state !== undefined) throw sqlError(state);
    return 'done';
  };
}

/** Records the pauses instead of waiting; the jitter source is fixed. */
function recorded(random = 0.5): RetryOptions & { pauses: number[] } {
  const pauses: number[] = [];
  return { pauses, random: () => random, pause: async (ms) => void pauses.push(ms) };
}

describe('retriedTransaction', () => {
  test.each([
    ['a serialization failure', SqlState.serializationFailure],
    ['a deadlock', SqlState.deadlockDetected],
  ])('runs the transaction again after %s, in a new transaction', async (_, state) => {
    const db = countingDb();
    const opts = recorded();
    await expect(retriedTransaction(db, failing(state), opts)).resolves.toBe('done');
    expect(db.opened).toBe(2);
    expect(opts.pauses).toHaveLength(1);
  });

  test('gives up after three runs and throws the last failure', async () => {
    const db = countingDb();
    const opts = recorded();
    const run = retriedTransaction(db, failing(SqlState.deadlockDetected, SqlState.serializationFailure, SqlState.deadlockDetected, SqlState.deadlockDetected), opts);
    await expect(run).rejects.toMatchObject({ code: SqlState.deadlockDetected, message: 'failed with SQLSTATE 40P01' });
    expect(db.opened).toBe(3);
    expect(opts.pauses).toHaveLength(2);
  });

  test('attempts bounds the runs', async () => {
    const db = countingDb();
    await expect(retriedTransaction(db, failing(...Array(9).fill(SqlState.serializationFailure)), { ...recorded(), attempts: 5 })).rejects.toMatchObject({ code: SqlState.serializationFailure });
    expect(db.opened).toBe(5);
  });

  test.each([
    ['a unique violation', sqlError(SqlState.uniqueViolation)],
    ['an exclusion violation', sqlError(SqlState.exclusionViolation)],
    ['a statement timeout', sqlError('57014')],
    ['an error without SQLSTATE', new Error('not a database error')],
  ])('runs once on %s: the default retries only races PostgreSQL aborted', async (_, error) => {
    const db = countingDb();
    const opts = recorded();
    await expect(
      retriedTransaction(db, async () => {
        throw error;
      }, opts),
    ).rejects.toBe(error);
    expect(db.opened).toBe(1);
    expect(opts.pauses).toEqual([]);
  });

  test('inside an outer transaction it runs once: the failure aborted the outer one too', async () => {
    const db = countingDb(true);
    await expect(retriedTransaction(db, failing(SqlState.serializationFailure), recorded())).rejects.toMatchObject({ code: SqlState.serializationFailure });
    expect(db.opened).toBe(1);
  });

  test('retryOn names the states instead of the default', async () => {
    const unique = countingDb();
    await expect(retriedTransaction(unique, failing(SqlState.uniqueViolation), { ...recorded(), retryOn: [SqlState.uniqueViolation] })).resolves.toBe('done');
    expect(unique.opened).toBe(2);

    const none = countingDb();
    await expect(retriedTransaction(none, failing(SqlState.deadlockDetected), { ...recorded(), retryOn: [] })).rejects.toMatchObject({ code: SqlState.deadlockDetected });
    expect(none.opened).toBe(1);
    expect(TRANSIENT_STATES).toEqual([SqlState.serializationFailure, SqlState.deadlockDetected]);
  });

  test('pauses are random up to a bound that doubles with each run', async () => {
    const highest = recorded(0.999);
    await expect(retriedTransaction(countingDb(), failing(...Array(3).fill(SqlState.deadlockDetected)), { ...highest, attempts: 4, jitterMs: 10 })).resolves.toBe('done');
    expect(highest.pauses.map(Math.round)).toEqual([10, 20, 40]);

    const lowest = recorded(0);
    await expect(retriedTransaction(countingDb(), failing(SqlState.deadlockDetected, SqlState.deadlockDetected), { ...lowest, jitterMs: 10 })).resolves.toBe('done');
    expect(lowest.pauses).toEqual([0, 0]);
  });

  test('by default it waits on a real timer and draws from Math.random', async () => {
    const random = jest.spyOn(Math, 'random').mockReturnValue(0);
    try {
      const db = countingDb();
      await expect(retriedTransaction(db, failing(SqlState.serializationFailure))).resolves.toBe('done');
      expect(random).toHaveBeenCalledTimes(1);
      expect(db.opened).toBe(2);
    } finally {
      random.mockRestore();
    }
  });
});
