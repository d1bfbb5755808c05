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
      { connection: workerConnection, concurrency: 8 },
    );
    this.worker.on('failed', (job, err) => {
      if (!(err instanceof RetryLater)) logger.error({ err, jobId: job?.id }, 'job failed');
    });
    this.worker.on('error', (err) => logger.error({ err }, 'job worker error'));
  }

  async enqueue(id: string): Promise<void> {
    await this.queue.add('run', { id }, { jobId: id });
  }

  async close(): Promise<void> {
    await this.worker.close();
    await this.queue.close();
    for (const c of this.connections) c.disconnect();
  }
}
