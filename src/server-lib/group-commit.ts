/**
 * Coalesces calls that arrive while a write is in flight into the next write (group commit).
 * Each write waits only for the I/O already pending (`setImmediate`: answers that arrived at the
 * same moment join it; an embedded store runs its statements synchronously, so without this each
 * write would carry one item), no timer: nothing waits when the server is idle, under load one
 * statement carries many. `write` answers each item, in order; an item whose key is already in the batch waits for
 * the next one (a statement touches a row once).
 */
export class GroupCommit<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private busy = false;

  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly keyOf: (item: I) => string,
    private readonly maxBatch = 500,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.busy) {
        this.busy = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch: typeof this.queue = [];
        const rest: typeof this.queue = [];
        const keys = new Set<string>();
        for (const entry of this.queue) {
          const key = this.keyOf(entry.item);
          if (batch.length < this.maxBatch && !keys.has(key)) {
            keys.add(key);
            batch.push(entry);
          } else rest.push(entry);
        }
        this.queue = rest;
        await answer(batch, this.write);
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      this.busy = false;
    }
  }
}

/**
 * Coalesces the calls made in one turn of the event loop into one call (`setImmediate`: the
 * requests handled in one poll go together; no timer, so a lone call goes at once). Unlike
 * GroupCommit, a batch does not wait for the one in flight: a stalled call holds only its own
 * batch (each bounded by its store's timeout), never the calls after it. A batch starts after
 * every item in it was submitted, so a read sees everything committed before its caller asked.
 * `call` answers each item, in order.
 */
export class TickBatch<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];

  constructor(
    private readonly call: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 500,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.queue.push({ item, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const waiting = this.queue;
    this.queue = [];
    for (let i = 0; i < waiting.length; i += this.maxBatch) void this.run(waiting.slice(i, i + this.maxBatch));
  }

  private run(batch: typeof this.queue): Promise<void> {
    return answer(batch, this.call);
  }
}

/**
 * GroupCommit with up to `parallel` writes in flight: the calls made in one turn of the event loop
 * go together into the next write, which starts at once unless `parallel` writes are under way
 * (then it waits for one to finish, gathering what comes meanwhile). For writes whose wait is the
 * store's commit (a WAL flush) rather than the CPU: one write at a time would make each caller wait
 * for the write before its own too.
 */
export class PipelinedCommit<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly parallel: number,
    private readonly maxBatch = 500,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.parallel) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.start();
    });
  }

  private start(): void {
    while (this.queue.length > 0 && this.inFlight < this.parallel) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.run(batch).finally(() => {
        this.inFlight--;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  private run(batch: typeof this.queue): Promise<void> {
    return answer(batch, this.write);
  }
}

/** Runs one batch and answers each waiting caller: its own result, or the batch's failure. */
async function answer<I, O>(batch: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[], call: (items: I[]) => Promise<O[]>): Promise<void> {
  try {
    const out = await call(batch.map((e) => e.item));
    batch.forEach((e, i) => e.resolve(out[i]));
  } catch (err) {
    for (const e of batch) e.reject(err);
  }
}
