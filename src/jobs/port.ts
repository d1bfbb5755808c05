/** The queue port: hands a job id to some worker, at least once; the runner makes it exactly once in effect. */
export interface JobQueue {
  readonly backend: 'bullmq' | 'in-process';
  enqueue(id: string): Promise<void>;
  close(): Promise<void>;
}

/** Runs one attempt of a job; throws RetryLater when the queue should try again later. */
export type JobRunner = (id: string) => Promise<void>;

export class RetryLater extends Error {
  constructor(
    readonly jobId: string,
    readonly reason: unknown,
  ) {
    super(`job ${jobId}: attempt failed, retrying`);
  }
}

/** Retries wait BACKOFF_MS, doubling per attempt (both adapters). */
export const BACKOFF_MS = 200;
