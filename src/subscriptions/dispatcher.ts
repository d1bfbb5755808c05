import type { AppContext } from '../context';
import type { Repository } from '../store';
import type { KeyEncryption } from '../server-lib/key-encryption';
import { claimDueChannels, endedChannels, recordSuccesses, releaseChannels, renewChannelLeases, type Channel, type Success } from './channel-store';
import { DEFAULT_DELIVERY, deliverClaimed, leaseMs, type DeliverySettings, type Sender } from './deliver';
import { GroupCommit } from '../server-lib/group-commit';
import { purgeEvents, type SubscriptionEvent } from './event-store';
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
  private readonly sender: Sender;

  constructor(
    private readonly ctx: AppContext,
    /** The application's repository: the server's status writes run its interceptors too. */
    repo: Repository,
    /** Opens the sealed channel headers. */
    kek: KeyEncryption,
    readonly settings: DispatcherSettings,
  ) {
    // Acknowledgements that arrive together are written together: one statement for many endpoints.
    const successes = new GroupCommit<Success, Channel | undefined>((items) => recordSuccesses(ctx.db, items), (s) => s.id);
    this.sender = { ctx, repo, kek, settings, recordSuccess: (s) => successes.submit(s) };
  }

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
      await setSubscriptionStatus(this.sender.repo, id, version, 'off');
    }
  }

  /**
   * Keeps `concurrency` subscriptions in delivery and as many claimed in waiting: when the waiting
   * ones run short it claims more (one statement, with their first events), so neither a
   * slow endpoint nor a claim's round trip holds the others up. Every lease the turn holds is
   * renewed in one statement every third of the lease. Stops claiming when a claim comes back
   * short (nothing else is due) or the turn's budget is spent, then waits for the deliveries.
   */
  private async deliverDue(): Promise<void> {
    const { concurrency } = this.settings;
    const lease = leaseMs(this.settings);
    const waiting: { channel: Channel; events?: SubscriptionEvent[] }[] = [];
    const running = new Set<Promise<void>>();
    const held = new Set<string>();
    const renewal = setInterval(() => {
      void renewChannelLeases(this.ctx.db, [...held], new Date(this.ctx.now().getTime() + lease)).catch(() => undefined);
    }, lease / 3);
    renewal.unref?.();
    let budget = concurrency * CLAIMS_PER_TURN;
    let more = true;
    try {
      while (!this.stopped) {
        if (more && waiting.length + running.size <= concurrency) {
          const room = Math.min(2 * concurrency - waiting.length - running.size, budget);
          const now = this.ctx.now();
          const claimed = await claimDueChannels(this.ctx.db, now, new Date(now.getTime() + lease), room);
          budget -= claimed.length;
          more = claimed.length === room && budget > 0;
          for (const c of claimed) {
            held.add(c.channel.id);
            waiting.push(c);
          }
        }
        while (running.size < concurrency && waiting.length > 0 && !this.stopped) {
          const { channel, events } = waiting.shift()!;
          const delivery: Promise<void> = deliverClaimed(this.sender, channel, events)
            .catch((err: unknown) => {
              if (!this.stopped) this.ctx.logger.error({ err }, 'subscription delivery failed');
            })
            .finally(() => {
              running.delete(delivery);
              held.delete(channel.id);
            });
          running.add(delivery);
        }
        if (running.size === 0) return;
        await Promise.race(running);
      }
    } finally {
      clearInterval(renewal);
      await Promise.allSettled(running);
      // Stopped with claims not started: hand them back at once rather than when the lease runs out.
      await releaseChannels(this.ctx.db, waiting.map((w) => w.channel.id)).catch(() => undefined);
    }
  }

  private async turn(): Promise<void> {
    try {
      await fanOut(this.ctx);
      await this.purge();
      await this.turnOffEnded();
      await this.deliverDue();
    } catch (err) {
      if (!this.stopped) this.ctx.logger.error({ err }, 'subscription dispatch failed');
    }
  }
}

/** Subscriptions claimed per turn at most, in units of `concurrency`: a turn never spins on subscriptions that stay due without progress; the poll takes up the rest. */
const CLAIMS_PER_TURN = 32;

