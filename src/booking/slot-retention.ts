import type { AppContext } from '../context';
import type { Repository } from '../store';
import { slotsRetired } from '../server-lib/metrics';
import { bookingTables } from './tables';

/** Slots per transaction: short row locks, and a batch's statements stay small. */
export const RETIREMENT_BATCH = 500;
/** How often each replica looks for slots to retire; the first look comes a minute after start. */
const INTERVAL_MS = 3_600_000;
const FIRST_MS = 60_000;

/**
 * Retires free slots that ended more than SLOT_RETENTION_DAYS ago: expunged with their versions,
 * index rows and lookup row (Repository.expunge), in batches of their own transaction. A slot an
 * Appointment names (booked, or cancelled) stays, as do busy and blocked slots. Returns how many
 * went. Two replicas running it at once take disjoint batches (retirableSlots skips locked rows).
 */
export async function retireFreeSlots(repo: Repository, cutoff: Date, batch = RETIREMENT_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await repo.withRetriedTransaction(async (tx) => {
      const tables = bookingTables(tx.db);
      const slots = await tables.retirableSlots(cutoff, batch);
      for (const owned of [false, true]) await tx.expunge('Slot', slots.filter((s) => s.owned === owned).map((s) => s.id), owned);
      await tables.forgetSlots(slots.map((s) => s.id));
      return slots.length;
    });
    total += n;
    slotsRetired.inc(n);
    if (n < batch) return total;
  }
}

/** The retirement on a timer, per replica (no coordination needed, see retireFreeSlots). */
export class SlotRetention {
  private timers: NodeJS.Timeout[] = [];
  private running?: Promise<unknown>;

  constructor(
    private readonly ctx: AppContext,
    private readonly repo: Repository,
  ) {}

  start(): void {
    const days = this.ctx.config.slotRetentionDays;
    if (days === 0 || this.timers.length > 0) return;
    const run = () => {
      if (this.running) return;
      const cutoff = new Date(this.ctx.now().getTime() - days * 86_400_000);
      this.running = retireFreeSlots(this.repo, cutoff)
        .then((n) => n > 0 && this.ctx.logger.info({ retired: n, endedBefore: cutoff.toISOString() }, 'past free slots retired'))
        .catch((err: unknown) => this.ctx.logger.warn({ err }, 'retiring past free slots failed; the next run tries again'))
        .finally(() => {
          this.running = undefined;
        });
    };
    const first = setTimeout(run, FIRST_MS);
    const every = setInterval(run, INTERVAL_MS);
    first.unref();
    every.unref();
    this.timers = [first, every];
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await this.running;
  }
}
