import type { AppContext } from '../context';
import { contributeToCapabilities } from '../fhir/capability';
import { registerWriteHook } from '../fhir/hooks';
import { registerOperation } from '../fhir/operations/registry';
import { addSubscriptionCapabilities } from './capabilities';
import { DEFAULT_DISPATCHER, Dispatcher, type DispatcherSettings } from './dispatcher';
import { eventsOperation } from './operations/events';
import { statusOperation } from './operations/status';
import { onSubscriptionWrite } from './write-rules';

export { Dispatcher, DEFAULT_DISPATCHER, type DispatcherSettings } from './dispatcher';

const dispatchers = new Map<AppContext, Dispatcher>();

/** Starts the delivery loop of this process (server start); idempotent per context. */
export function startSubscriptions(ctx: AppContext, settings: Partial<DispatcherSettings> = {}): Dispatcher {
  let d = dispatchers.get(ctx);
  if (!d) {
    d = new Dispatcher(ctx, { ...DEFAULT_DISPATCHER, ...settings });
    dispatchers.set(ctx, d);
    d.start();
  }
  return d;
}

/** Stops the loop and waits for the turn in progress (server close). */
export async function stopSubscriptions(ctx: AppContext): Promise<void> {
  const d = dispatchers.get(ctx);
  if (!d) return;
  dispatchers.delete(ctx);
  await d.stop();
}

/** A write that may create work (a Subscription to handshake, an outbox event) wakes the loops. */
function nudge(): void {
  for (const d of dispatchers.values()) d.nudge();
}

let registered = false;

function register(): void {
  if (registered) return;
  registered = true;
  registerWriteHook('Subscription', async (event) => {
    await onSubscriptionWrite(event);
    nudge();
  });
  registerWriteHook('Appointment', async () => nudge());
  registerOperation(statusOperation);
  registerOperation(eventsOperation);
  contributeToCapabilities(addSubscriptionCapabilities);
}

register();
