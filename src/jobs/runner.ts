import type { AppContext } from '../context';
import type { Db } from '../store';
import { RetryLater } from './port';
import { claimJob, completeJob, LEASE_MS, readJob, renewJobLease, requeueJob, type JobResult } from './store';

export interface JobKind {
  /**
   * Does the work inside `tx`, the transaction that also records the result: a crash before the
   * commit leaves neither the effect nor the result, so a retry starts clean (idempotent by id).
   */
  run(ctx: AppContext, payload: unknown, tx: Db): Promise<JobResult>;
  /** The final result for an error the work ended with; undefined: transient, try again. */
  failed(err: unknown): JobResult | undefined;
  /** The result once the attempts are used up. */
  exhausted(err: unknown): JobResult;
}

/** One attempt of job `id`, with the kinds of the application that runs it. */
export async function runJob(ctx: AppContext, kinds: ReadonlyMap<string, JobKind>, id: string): Promise<void> {
  const job = await claimJob(ctx.db, id, ctx.now());
  if (!job) return;
  const kind = kinds.get(job.kind);
  if (!kind) {
    await completeJob(ctx.db, id, { status: 500, body: { error: `no handler for job kind ${job.kind}` } }, ctx.now());
    return;
  }
  // Outside the job's transaction: the renewal must commit while the job is still working.
  const heartbeat = setInterval(() => {
    void renewJobLease(ctx.db, id, ctx.now()).catch(() => undefined);
  }, LEASE_MS / 3);
  heartbeat.unref?.();
  try {
    await ctx.db.transaction(async (tx) => {
      // Two workers given the same job (a stall false alarm) queue here; the second finds it done.
      const current = await readJob(tx, id, { forUpdate: true });
      if (!current || current.state !== 'running') return;
      const result = await kind.run(ctx, job.payload, tx);
      await completeJob(tx, id, result, ctx.now());
    });
  } catch (err) {
    const final = kind.failed(err);
    if (final) {
      await completeJob(ctx.db, id, final, ctx.now());
      return;
    }
    if (job.attempts >= job.maxAttempts) {
      ctx.logger.error({ err, jobId: id, attempts: job.attempts }, 'job gave up');
      await completeJob(ctx.db, id, kind.exhausted(err), ctx.now());
      return;
    }
    ctx.logger.warn({ err, jobId: id, attempt: job.attempts }, 'job attempt failed, retrying');
    await requeueJob(ctx.db, id, ctx.now());
    throw new RetryLater(id, err);
  } finally {
    clearInterval(heartbeat);
  }
}
