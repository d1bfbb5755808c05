import crypto from 'node:crypto';
import type { AppContext } from '../context';
import { BullMqQueue } from './bullmq';
import { InProcessQueue } from './in-process';
import type { JobQueue } from './port';
import { runJob, type JobKind } from './runner';
import { abandonedJobs, cancelJob, insertJob, purgeExpired, readJob, storeId, type JobRecord, type JobState } from './store';

export type { JobKind } from './runner';
export type { JobRecord, JobResult, JobState } from './store';
export { RetryLater, type JobQueue } from './port';

/** Attempts per job before it answers its `exhausted` result. */
export const MAX_ATTEMPTS = 3;
/** How often a replica looks for jobs a crashed worker left (a lease, LEASE_MS, ran out). */
const SWEEP_MS = 2000;
/** How often expired results are purged. */
const PURGE_MS = 10 * 60 * 1000;
/** A job still queued after this long was never handed to a queue (crash between insert and enqueue). */
const QUEUED_GRACE_MS = 10_000;

interface Running {
  queue: JobQueue;
  sweeper: NodeJS.Timeout;
  first: NodeJS.Timeout;
}

/**
 * The job machinery of one application: the kinds it runs, and once started the queue (BullMQ on
 * Redis when the context has one, in-process otherwise) and the sweeper. Servers start it so
 * every replica works the queue; a submit starts it too.
 */
export class Jobs {
  private readonly kinds = new Map<string, JobKind>();
  private running?: Promise<Running>;

  constructor(private readonly ctx: AppContext) {}

  /** Adds a kind of work (the FHIR layer: a request run later). */
  define(name: string, kind: JobKind): void {
    this.kinds.set(name, kind);
  }

  start(): Promise<JobQueue> {
    this.running ??= this.open();
    return this.running.then((r) => r.queue);
  }

  async stop(): Promise<void> {
    const running = this.running;
    if (!running) return;
    this.running = undefined;
    const { queue, sweeper, first } = await running;
    clearInterval(sweeper);
    clearTimeout(first);
    await queue.close();
  }

  /** One attempt of job `id` (what a queue worker calls). */
  run(id: string): Promise<void> {
    return runJob(this.ctx, this.kinds, id);
  }

  private purgedAt = -Infinity;

  /** Re-enqueues jobs left behind by a crashed worker and drops results older than 24 h. */
  async sweep(): Promise<string[]> {
    const queue = await this.start();
    const now = this.ctx.now();
    if (now.getTime() - this.purgedAt >= PURGE_MS) {
      this.purgedAt = now.getTime();
      await purgeExpired(this.ctx.db, now);
    }
    const ids = await abandonedJobs(this.ctx.db, now, QUEUED_GRACE_MS);
    for (const id of ids) await queue.enqueue(id);
    return ids;
  }

  /** Records a job (state and, later, result in the database) and hands it to the queue. */
  async submit(job: { kind: string; payload: unknown; owner: string | null }): Promise<string> {
    const id = crypto.randomUUID();
    await insertJob(this.ctx.db, { id, ...job, maxAttempts: MAX_ATTEMPTS, now: this.ctx.now() });
    await (await this.start()).enqueue(id);
    return id;
  }

  /** The job as any replica sees it; undefined when unknown or past its 24 h. */
  async find(id: string): Promise<JobRecord | undefined> {
    const job = await readJob(this.ctx.db, id);
    return job && job.expiresAt > this.ctx.now() ? job : undefined;
  }

  cancel(id: string): Promise<JobState | undefined> {
    return cancelJob(this.ctx.db, id, this.ctx.now());
  }

  private async open(): Promise<Running> {
    const { ctx } = this;
    const run = (id: string) => this.run(id);
    const queue: JobQueue = ctx.redis
      ? new BullMqQueue(ctx.redis, `terminus-jobs-${await storeId(ctx.db)}`, run, ctx.logger, MAX_ATTEMPTS)
      : new InProcessQueue(run, ctx.logger);
    const sweepNow = () => {
      this.sweep().catch((err: unknown) => ctx.logger.warn({ err }, 'job sweep failed'));
    };
    const sweeper = setInterval(sweepNow, SWEEP_MS);
    sweeper.unref();
    // At start: what a previous process left behind (embedded restart) runs again right away.
    const first = setTimeout(sweepNow, 0);
    first.unref();
    return { queue, sweeper, first };
  }
}
