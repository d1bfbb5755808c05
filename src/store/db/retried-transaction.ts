import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from './db';
import { SqlState, sqlState } from './errors';

/**
 * SQLSTATEs after which the same transaction, run again from its start, may succeed: PostgreSQL
 * aborted it so that a concurrent one could go on (PostgreSQL documentation 13.5, "Serialization
 * Failure Handling": retry 40001, and deadlocks, 40P01; a unique or exclusion violation is worth
 * a retry only where the caller knows it lost a race, so it names them itself).
 */
export const TRANSIENT_STATES: readonly string[] = [SqlState.serializationFailure, SqlState.deadlockDetected];

export interface RetryOptions {
  /** SQLSTATEs after which the transaction runs again; default TRANSIENT_STATES. */
  retryOn?: readonly string[];
  /** Runs in all, the first included; default 3. */
  attempts?: number;
  /**
   * Bound of the random pause before the second run, in ms, doubled before each further one
   * (full jitter: racers that lost together do not meet again at the same instant); default 10.
   */
  jitterMs?: number;
  /** The source of the jitter, in [0, 1); Math.random by default. */
  random?: () => number;
  /** How a pause is waited for; a timer by default. */
  pause?: (ms: number) => Promise<unknown>;
}

const DEFAULT_ATTEMPTS = 3;
const DEFAULT_JITTER_MS = 10;

/**
 * Runs `fn` in a transaction on `db` and runs it again, in a new transaction, when it fails with
 * one of `retryOn`'s SQLSTATEs, at most `attempts` times in all; the last failure is thrown. `fn`
 * must be safe to run again: everything it wrote was rolled back with the failed run. Inside an
 * outer transaction (`db.inTransaction`) it runs once: the failure aborted the outer transaction
 * too, which only its owner can run again.
 */
export async function retriedTransaction<T>(db: Db, fn: (tx: Db) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const retryOn = opts.retryOn ?? TRANSIENT_STATES;
  const attempts = opts.attempts ?? DEFAULT_ATTEMPTS;
  const jitterMs = opts.jitterMs ?? DEFAULT_JITTER_MS;
  for (let run = 1; ; run++) {
    try {
      return await db.transaction(fn);
    } catch (err) {
      const state = sqlState(err);
      if (db.inTransaction || run >= attempts || state === undefined || !retryOn.includes(state)) throw err;
      const ms = (opts.random ?? Math.random)() * jitterMs * 2 ** (run - 1);
      await (opts.pause ?? sleep)(ms);
    }
  }
}
