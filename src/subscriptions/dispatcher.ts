import type { AppContext } from '../context';
import type { Repository } from '../store';
import type { KeyEncryption } from '../shared/key-encryption';
import { claimDueChannels, endedChannels, type Channel } from './channel-store';
import { DEFAULT_DELIVERY, deliverClaimed, leaseMs, type DeliverySettings } from './deliver';
import { eventsFor, purgeEvents } from './event-store';
import { fanOut } from './fan-out';
import { setSubscriptionStatus } from './subscription-status';

export interface DispatcherSettings extends DeliverySettings {
  /** How often the outbox and the due subscriptions are looked at without a nudge. */
  pollMs: number;
  /** Subscriptions delivered to at the same time. */
  concurrency: number;
  /** How long numbered events stay available to `$events`. */
  eventRetentionMs: number;
}

/**
 * Defaults: a look every second (writes nudge the dispatcher at once, so the poll only catches
 * what other replicas committed and retries that come due); 64 endpoints at a time.
 */
export const DEFAULT_DISPATCHER: DispatcherSettings = { ...DEFAULT_DELIVERY, pollMs: 1000, concurrency: 64, eventRetentionMs: 30 * 24 * 3600 * 1000 };

/** Retention runs at most this often. */
const PURGE_EVERY_MS = 3600 * 1000;

/**
 * The durable delivery loop of one process: outbox → numbered events (fan-out) → rest-hook
 * deliveries, all state in PostgreSQL. Started with the server: whatever a previous process
 * committed but did not deliver (outbox rows, events above the delivered mark, handshakes) is
 * picked up on the first turn, so delivery is at least once.
 */
export class Dispatcher {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private queued?: Promise<void>;
  private stopped = false;
  private nudged = false;
  private purgedAt = -Infinity;

  constructor(
    private readonly ctx: AppContext,
    /** The application's repository: the server's status writes run its interceptors too. */
    private readonly repo: Repository,
    /** Opens the sealed channel headers. */
    private readonly kek: KeyEncryption,
    readonly settings: DispatcherSettings,
  ) {}

  start(): void {
    this.schedule(0);
  }

  /** Runs a turn now, or right after the one in progress; resolves when a turn begun after the call is over. */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.queued ??= this.running.then(() => {
        this.queued = undefined;
        return this.tick();
      });
      return this.queued;
    }
    this.running = this.turn().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    await this.queued;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      void this.tick().finally(() => this.schedule(this.settings.pollMs));
    }, ms);
    this.timer.unref?.();
  }

  /**
   * Nudged after a write has committed (`Db.afterCommit`): one turn, coalesced with the one in
   * progress and with other nudges of the same moment.
   */
  nudge(): void {
    if (this.nudged) return;
    this.nudged = true;
    const t = setTimeout(() => {
      this.nudged = false;
      void this.tick();
    }, 0);
    t.unref?.();
  }

  private async purge(): Promise<void> {
    const now = this.ctx.now().getTime();
    if (now - this.purgedAt < PURGE_EVERY_MS) return;
    this.purgedAt = now;
    await purgeEvents(this.ctx.db, new Date(now - this.settings.eventRetentionMs));
  }

  /** R4 Subscription.end: the server turns the subscription off once it has passed. */
  private async turnOffEnded(): Promise<void> {
    for (const { id, version } of await endedChannels(this.ctx.db, this.ctx.now())) {
      await setSubscriptionStatus(this.repo, id, version, 'off');
    }
  }

  private async turn(): Promise<void> {
    try {
      await fanOut(this.ctx);
      await this.purge();
      await this.turnOffEnded();
      // Bounded: a turn never spins on subscriptions that stay due without progress.
      for (let round = 0; round < 16 && !this.stopped; round++) {
        const now = this.ctx.now();
        const claimed = await claimDueChannels(this.ctx.db, now, new Date(now.getTime() + leaseMs(this.settings)), this.settings.concurrency);
        if (claimed.length === 0) return;
        // The first notification's events of every claimed subscription in one query.
        const events = await eventsFor(this.ctx.db, claimed.filter(hasEvents).map((c) => [c.id, c.deliveredThrough + 1, Math.min(c.eventsSinceStart, c.deliveredThrough + (c.maxCount ?? 1))]));
        const results = await Promise.allSettled(claimed.map((c) => deliverClaimed(this.ctx, this.repo, this.kek, c, this.settings, hasEvents(c) ? (events.get(c.id) ?? []) : undefined)));
        for (const r of results) if (r.status === 'rejected' && !this.stopped) this.ctx.logger.error({ err: r.reason }, 'subscription delivery failed');
        if (claimed.length < this.settings.concurrency) return;
      }
    } catch (err) {
      if (!this.stopped) this.ctx.logger.error({ err }, 'subscription dispatch failed');
    }
  }
}

function hasEvents(c: Channel): boolean {
  return c.status === 'active' && c.deliveredThrough < c.eventsSinceStart;
}
