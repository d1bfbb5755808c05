import type { AppContext } from '../context';
import type { Repository, WriteInterceptor } from '../store';
import type { KeyEncryption } from '../server-lib/key-encryption';
import { DEFAULT_DISPATCHER, Dispatcher, type DispatcherSettings } from './dispatcher';
import { onSubscriptionWrite } from './write-rules';

export { Dispatcher, DEFAULT_DISPATCHER, type DispatcherSettings } from './dispatcher';
export { addSubscriptionCapabilities } from './capabilities';
export { BACKPORT } from './backport';
export { readChannel, readChannels } from './channel-store';
export { eventsBetween } from './event-store';
export { notificationBundle } from './notification-bundle';
export { statusParameters } from './status-parameters';

/**
 * The write rules of the subscriptions part: ISiKSubscriptionTermin checks on every Subscription a
 * client writes (not on the server's own status changes), and a wake-up of the delivery loop
 * once a write that may create work (a Subscription to handshake, an Appointment event) has
 * committed: one turn then finds it, instead of turns guessing at the commit (a 1,000-subscriber
 * fan-out within 1 s, docs/requirements.md#performance-aims).
 */
export function subscriptionInterceptors(ctx: AppContext, kek: KeyEncryption, wake: () => void): WriteInterceptor[] {
  return [
    {
      name: 'subscriptions: ISiKSubscriptionTermin rules',
      types: ['Subscription'],
      async beforeWrite(event) {
        if (event.origin === 'system') return;
        await onSubscriptionWrite(ctx, kek, event);
        event.repo.db.afterCommit(wake);
      },
    },
    { name: 'subscriptions: wake the delivery loop', types: ['Appointment'], beforeWrite: async (event) => event.repo.db.afterCommit(wake) },
  ];
}

/** The delivery loop of one application: started with the server, stopped at close. */
export class Subscriptions {
  private dispatcher?: Dispatcher;

  constructor(
    private readonly ctx: AppContext,
    private readonly repo: Repository,
    /** Seals and opens the channel headers (the KEK of the signing keys). */
    private readonly kek: KeyEncryption,
  ) {}

  /** Starts the loop (idempotent). */
  start(settings: Partial<DispatcherSettings> = {}): Dispatcher {
    if (!this.dispatcher) {
      this.dispatcher = new Dispatcher(this.ctx, this.repo, this.kek, { ...DEFAULT_DISPATCHER, ...settings });
      this.dispatcher.start();
    }
    return this.dispatcher;
  }

  /** Stops the loop and waits for the turn in progress. */
  async stop(): Promise<void> {
    const d = this.dispatcher;
    this.dispatcher = undefined;
    await d?.stop();
  }

  /** A write that may create work wakes the loop (when it runs in this process). */
  nudge(): void {
    this.dispatcher?.nudge();
  }
}
