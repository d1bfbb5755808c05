import crypto from 'node:crypto';
import type { AppContext } from '../context';
import { BullMqQueue } from './bullmq';
import { InProcessQueue } from './in-process';
import type { JobQueue } from './port';
import { runJob } from './runner';
import { abandonedJobs, cancelJob, insertJob, purgeExpired, readJob, storeId, type JobRecord, type JobState } from './store';

export { registerJobKind, runJob, type JobKind } from './runner';
export type { JobRecord, JobResult, JobState } from './store';
export { RetryLater, type JobQueue } from './port';

/** Attempts per job before it answers its `exhausted` result. */
export const MAX_ATTEMPTS = 3;
/** How often a replica looks for jobs a crashed worker left, and purges expired results. */
const SWEEP_MS = 30_000;
/** A job still queued after this long was never handed to a queue (crash between insert and enqueue). */
const QUEUED_GRACE_MS = 10_000;

interface Jobs {
  queue: JobQueue;
  sweeper: NodeJS.Timeout;
  first: NodeJS.Timeout;
}

const started = new WeakMap<AppContext, Promise<Jobs>>();

/**
 * The job machinery of a context, started once: BullMQ on Redis when the context has one,
 * in-process otherwise. Servers call it at start so every replica works the queue.
 */
export function startJobs(ctx: AppContext): Promise<JobQueue> {
  let jobs = started.get(ctx);
  if (!jobs) {
    jobs = (async () => {
      const run = (id: string) => runJob(ctx, id);
      const queue: JobQueue = ctx.redis
        ? new BullMqQueue(ctx.redis, `terminus-jobs-${await storeId(ctx.db)}`, run, ctx.logger, MAX_ATTEMPTS)
        : new InProcessQueue(run, ctx.logger);
      const sweepNow = () => {
        sweep(ctx).catch((err: unknown) => ctx.logger.warn({ err }, 'job sweep failed'));
      };
      const sweeper = setInterval(sweepNow, SWEEP_MS);
      sweeper.unref();
      // At start: what a previous process left behind (embedded restart) runs again right away.
      const first = setTimeout(sweepNow, 0);
      first.unref();
      return { queue, sweeper, first };
    })();
    started.set(ctx, jobs);
  }
  return jobs.then((j) => j.queue);
}

export async function stopJobs(ctx: AppContext): Promise<void> {
  const jobs = started.get(ctx);
  if (!jobs) return;
  started.delete(ctx);
  const { queue, sweeper, first } = await jobs;
  clearInterval(sweeper);
  clearTimeout(first);
  await queue.close();
}

/** Re-enqueues jobs left behind by a crashed worker and drops results older than 24 h. */
export async function sweep(ctx: AppContext): Promise<string[]> {
  const queue = await startJobs(ctx);
  const now = ctx.now();
  await purgeExpired(ctx.db, now);
  const ids = await abandonedJobs(ctx.db, now, QUEUED_GRACE_MS);
  for (const id of ids) await queue.enqueue(id);
  return ids;
}

/** Records a job (state and, later, result in the database) and hands it to the queue. */
export async function submitJob(ctx: AppContext, job: { kind: string; payload: unknown; owner: string | null }): Promise<string> {
  const id = crypto.randomUUID();
  await insertJob(ctx.db, { id, ...job, maxAttempts: MAX_ATTEMPTS, now: ctx.now() });
  await (await startJobs(ctx)).enqueue(id);
  return id;
}

/** The job as any replica sees it; undefined when unknown or past its 24 h. */
export async function findJob(ctx: AppContext, id: string): Promise<JobRecord | undefined> {
  const job = await readJob(ctx.db, id);
  return job && job.expiresAt > ctx.now() ? job : undefined;
}

export function cancel(ctx: AppContext, id: string): Promise<JobState | undefined> {
  return cancelJob(ctx.db, id, ctx.now());
}
