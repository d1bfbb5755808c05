import type { Logger } from '../logger';
import { BACKOFF_MS, RetryLater, type JobQueue, type JobRunner } from './port';

/**
 * Embedded mode (no REDIS_URL): jobs run in this process. State lives in the database, so a
 * restart or another replica picks up what a crashed process left (see sweep in index.ts).
 */
export class InProcessQueue implements JobQueue {
  readonly backend = 'in-process' as const;
  private readonly inFlight = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly running = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly run: JobRunner,
    private readonly logger: Logger,
  ) {}

  async enqueue(id: string): Promise<void> {
    if (this.inFlight.has(id)) return;
    this.inFlight.add(id);
    this.schedule(id, 0, 1);
  }

  private schedule(id: string, delayMs: number, attempt: number): void {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const execution = this.run(id).then(
        () => {
          this.inFlight.delete(id);
        },
        (err: unknown) => {
          if (err instanceof RetryLater && !this.closed) {
            this.schedule(id, BACKOFF_MS * 2 ** (attempt - 1), attempt + 1);
            return;
          }
          this.inFlight.delete(id);
          if (!this.closed) this.logger.error({ err, jobId: id }, 'job runner failed');
        },
      );
      this.running.add(execution);
      void execution.finally(() => this.running.delete(execution));
    }, delayMs);
    timer.unref?.();
    this.timers.add(timer);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }
}
