import type { AppContext } from '../context';
import { deliveries } from '../server-lib/metrics';
import { toXml } from '../model';
import type { NotificationType } from './backport';
import { openHeaders, type ChannelHeader } from './channel-headers';
import { recordFailure, recordSuccesses, releaseChannels, setErrorCode, type Channel, type Success } from './channel-store';
import { eventsBetween, type SubscriptionEvent } from './event-store';
import { notificationBundle } from './notification-bundle';
import { postNotification, type PostResult } from './rest-hook';
import { setSubscriptionStatus } from './subscription-status';
import type { Repository } from '../store';
import type { KeyEncryption } from '../server-lib/key-encryption';
import { fhirBaseUrl } from '../config';

/** Delivery knobs; tests shorten the waits. */
export interface DeliverySettings {
  /** Attempts per notification before the subscription turns `error`. */
  maxAttempts: number;
  /** Wait before the second attempt; doubles per further attempt (exponential backoff). */
  backoffMs: number;
  /** Per-request timeout when the Subscription names none (`backport-timeout`), and the cap on it. */
  timeoutMs: number;
  maxTimeoutMs: number;
  /** Notifications sent per claim before the subscription is released to the others (bounds the lease). */
  perClaim: number;
  /**
   * How long a claim keeps the other senders off a subscription; unset: derived from `perClaim`
   * and `maxTimeoutMs` (see `leaseMs`). Shorter only where a quick takeover after a crash matters
   * more than order (tests).
   */
  leaseMs?: number;
}

/**
 * Defaults: 6 attempts 5 s apart doubling (5+10+20+40+80 s: an endpoint may be down about two and
 * a half minutes before the subscription turns `error`); 10 s per request, at most 30 s.
 */
export const DEFAULT_DELIVERY: DeliverySettings = { maxAttempts: 6, backoffMs: 5000, timeoutMs: 10_000, maxTimeoutMs: 30_000, perClaim: 5 };

/** What delivering needs: the server's repository (status writes run its interceptors), the key that opens sealed headers, the success writer (batched by the dispatcher). */
export interface Sender {
  ctx: AppContext;
  repo: Repository;
  kek: KeyEncryption;
  settings: DeliverySettings;
  recordSuccess(success: Success): Promise<Channel | undefined>;
}

/** What a step leaves: the subscription to continue with (still leased), or whether the lease is still held. */
type StepOutcome = { next: Channel } | { next?: undefined; leased: boolean };

/**
 * A claim lasts this long unless renewed; the delivering process renews it every third of it
 * while it works (a slow endpoint may take maxTimeoutMs per notification). A process that dies
 * stops renewing: another replica takes the subscription over within this plus one poll (under
 * 10 s, docs/requirements.md#robustness-aims), instead of waiting out the longest possible delivery.
 */
export const DEFAULT_LEASE_MS = 6000;

export function leaseMs(settings: DeliverySettings): number {
  return settings.leaseMs || DEFAULT_LEASE_MS;
}

/**
 * Works one claimed subscription: its handshake when `requested`, else the events above the
 * delivered mark in order (at most `maxCount` per notification), else a heartbeat when due; up to
 * `perClaim` notifications, then the lease ends. `prefetched`: the first notification's events,
 * read with those of the other claimed subscriptions. The caller keeps the lease alive meanwhile
 * (the dispatcher renews all it holds in one statement).
 */
export async function deliverClaimed(sender: Sender, claimed: Channel, prefetched?: SubscriptionEvent[]): Promise<void> {
  const { ctx, settings } = sender;
  let channel = claimed;
  let events = prefetched;
  let leased = true;
  try {
    for (let turn = 0; turn < settings.perClaim; turn++) {
      const outcome = await step(sender, channel, events);
      events = undefined;
      if (!outcome.next) {
        leased = outcome.leased;
        return;
      }
      channel = outcome.next;
    }
  } finally {
    if (leased) await releaseChannels(ctx.db, [claimed.id]);
  }
}

/** Sends one notification if one is due. */
async function step(sender: Sender, channel: Channel, prefetched?: SubscriptionEvent[]): Promise<StepOutcome> {
  const { ctx, repo, kek, settings } = sender;
  const now = ctx.now();
  const due = dueWork(channel, now);
  const version = channel.version;
  if (!due || !channel.endpoint || !version) return { leased: true };
  let headers: ChannelHeader[];
  try {
    headers = openHeaders(kek, channel.headersSealed);
  } catch (err) {
    ctx.logger.error({ err, subscription: channel.id }, 'channel headers cannot be opened (key changed); the client must set them again');
    await setErrorCode(ctx.db, channel.id, 'error-response');
    await setSubscriptionStatus(repo, channel.id, version, 'error', 'channel.header cannot be decrypted with the current key; update the Subscription with the headers in clear');
    return { leased: true };
  }
  const timeoutMs = Math.min(channel.timeoutS ? channel.timeoutS * 1000 : settings.timeoutMs, settings.maxTimeoutMs);
  const send = (type: NotificationType, events: SubscriptionEvent[] = []) => {
    const bundle = notificationBundle(
      {
        baseUrl: fhirBaseUrl(ctx.config),
        subscriptionId: channel.id,
        topic: channel.topic,
        status: channel.status,
        type,
        eventsSinceStart: type === 'event-notification' ? events[events.length - 1].eventNumber : channel.eventsSinceStart,
        events,
      },
      now,
    );
    const xml = (channel.payload ?? '').toLowerCase().startsWith('application/fhir+xml');
    return postNotification(channel.endpoint!, xml ? toXml(bundle) : JSON.stringify(bundle), channel.payload!, headers, timeoutMs).then((result) => {
      deliveries.inc({ type, outcome: result.ok ? 'delivered' : result.code });
      return result;
    });
  };
  const continueWith = (next: Channel | undefined): StepOutcome => (next ? { next } : { leased: false });

  if (due === 'handshake') {
    const result = await send('handshake');
    if (result.ok) {
      // Active and delivered in one transaction: nobody sees the one without the other.
      const next = await repo.withTransaction(async (tx) => {
        await setSubscriptionStatus(tx, channel.id, version, 'active');
        return (await recordSuccesses(tx.db, [{ id: channel.id, at: now, release: false }]))[0];
      });
      return next ? { next } : { leased: true };
    }
    // Backport "channels": a failed handshake leaves the subscription in error; the client
    // reactivates it by updating its status.
    await setErrorCode(ctx.db, channel.id, result.code);
    await setSubscriptionStatus(repo, channel.id, version, 'error', `handshake failed: ${result.detail}`);
    logFailure(ctx, channel, 'handshake', result);
    return { leased: true };
  }

  if (due === 'events') {
    const limit = channel.maxCount ?? 1;
    const events = prefetched?.length ? prefetched : await eventsBetween(ctx.db, channel.id, channel.deliveredThrough + 1, channel.eventsSinceStart, limit);
    if (events.length === 0) {
      // Numbers whose events are gone (past the retention while undelivered): skip the gap.
      return continueWith(await sender.recordSuccess({ id: channel.id, at: channel.lastSuccessAt ?? now, deliveredThrough: channel.eventsSinceStart, release: true }));
    }
    const result = await send('event-notification', events.slice(0, limit));
    if (result.ok) return continueWith(await sender.recordSuccess({ id: channel.id, at: now, deliveredThrough: events[Math.min(events.length, limit) - 1].eventNumber, release: true }));
    await failed(ctx, repo, channel, version, result, settings);
    return { leased: true };
  }

  const result = await send('heartbeat');
  if (result.ok) return continueWith(await sender.recordSuccess({ id: channel.id, at: now, release: true }));
  await failed(ctx, repo, channel, version, result, settings);
  return { leased: true };
}

/** Backoff, and after the last attempt `error` with the coded reason. */
async function failed(ctx: AppContext, repo: Repository, channel: Channel, version: string, result: Exclude<PostResult, { ok: true }>, settings: DeliverySettings): Promise<void> {
  const retryAt = new Date(ctx.now().getTime() + settings.backoffMs * 2 ** channel.failures);
  const failures = await recordFailure(ctx.db, channel.id, result.code, retryAt);
  logFailure(ctx, channel, `attempt ${failures}/${settings.maxAttempts}`, result);
  if (failures >= settings.maxAttempts) {
    await setSubscriptionStatus(repo, channel.id, version, 'error', `delivery failed ${failures} times: ${result.detail}`);
  }
}

function logFailure(ctx: AppContext, channel: Channel, what: string, result: Exclude<PostResult, { ok: true }>): void {
  // The endpoint's origin only: paths and queries may carry tokens.
  const origin = channel.endpoint ? new URL(channel.endpoint).origin : undefined;
  ctx.logger.warn({ subscription: channel.id, endpoint: origin, code: result.code, detail: result.detail }, `rest-hook ${what} failed`);
}

/**
 * What a subscription is owed now: its handshake while `requested`; when `active`, the events
 * above the delivered mark, else a heartbeat once `heartbeatPeriod` passed since the last
 * successful delivery (ISiK "Funktionen und Interaktionen" point 5).
 */
function dueWork(channel: Channel, now: Date): 'handshake' | 'events' | 'heartbeat' | undefined {
  if (channel.status === 'requested') return 'handshake';
  if (channel.status !== 'active') return undefined;
  if (channel.deliveredThrough < channel.eventsSinceStart) return 'events';
  const last = channel.lastSuccessAt?.getTime() ?? -Infinity;
  if (channel.heartbeatS && last + channel.heartbeatS * 1000 <= now.getTime()) return 'heartbeat';
  return undefined;
}
