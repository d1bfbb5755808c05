import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger';
import { BACKOFF_MS, RetryLater, type JobQueue, type JobRunner } from './port';

/**
 * REDIS_URL set: BullMQ carries job ids between replicas. BullMQ's job id is ours, so a job
 * enqueued twice (sweep after a crash) runs once; a worker that dies mid-job leaves the job
 * stalled and BullMQ hands it to another worker.
 */
export class BullMqQueue implements JobQueue {
  readonly backend = 'bullmq' as const;
  private readonly queue: Queue;
  private readonly worker: Worker;
  private readonly connections: Redis[];

  constructor(redis: Redis, name: string, run: JobRunner, logger: Logger, maxAttempts: number) {
    const queueConnection = redis.duplicate();
    const workerConnection = redis.duplicate({ maxRetriesPerRequest: null });
    this.connections = [queueConnection, workerConnection];
    this.queue = new Queue(name, {
      connection: queueConnection,
      defaultJobOptions: {
        // The database counts attempts and decides when to give up; BullMQ only needs enough.
        attempts: maxAttempts + 1,
        backoff: { type: 'exponential', delay: BACKOFF_MS },
        removeOnComplete: 1000,
        removeOnFail: 1000,
      },
    });
    this.worker = new Worker(
      name,
      async (job) => {
        await run((job.data as { id: string }).id);
      },
      // A dead worker's job is found stalled within lockDuration + stalledInterval (under 10 s,
      // docs/requirements.md#robustness-aims); a live worker renews its lock every half lockDuration.
      { connection: workerConnection, concurrency: 8, lockDuration: 6000, stalledInterval: 3000 },
    );
    this.worker.on('failed', (job, err) => {
      if (!(err instanceof RetryLater)) logger.error({ err, jobId: job?.id }, 'job failed');
    });
    // One line per Redis outage, not one per reconnect attempt (the connections say when it is back).
    let down = false;
    const onError = (err: Error) => {
      if (down) return;
      down = true;
      logger.error({ err }, 'job queue: Redis unavailable');
    };
    this.worker.on('error', onError);
    this.queue.on('error', onError);
    for (const c of this.connections) c.on('ready', () => (down = false));
  }

  async enqueue(id: string): Promise<void> {
    await this.queue.add('run', { id }, { jobId: id });
  }

  /** Lets running jobs finish for up to CLOSE_WAIT_MS (Redis may be gone), then stops hard: an abandoned job is retried by its id. */
  async close(): Promise<void> {
    if (!(await within(this.worker.close(), CLOSE_WAIT_MS))) await within(this.worker.close(true), CLOSE_WAIT_MS);
    await within(this.queue.close(), CLOSE_WAIT_MS);
    for (const c of this.connections) c.disconnect();
  }
}

const CLOSE_WAIT_MS = 5000;

/** Whether `work` settled within `ms` (its failure counts as settled: closing is best effort). */
function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    timer.unref();
    work.then(
      () => (clearTimeout(timer), resolve(true)),
      () => (clearTimeout(timer), resolve(true)),
    );
  });
}
