import type { Appointment } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import { claimPendingEvents, markProcessed, readVersion, type Db, type PendingEvent } from '../store';
import type { Caller } from '../common/identity';
import { canSee } from '../server-lib/owner';
import { listeningChannels } from './channel-store';
import { numberEvent } from './event-store';
import { matchesFilter, parseFilterCriteria } from './filter-criteria';
import { topicsFor } from './topics';
import { fhirBaseUrl } from '../config';

/** Outbox rows taken per transaction. */
const BATCH = 100;

/**
 * Consumes the booking outbox (contract in migrations/200_booking.sql): each unprocessed event is
 * matched against the subscriptions of its topic (owner visibility, filter criteria) and numbered
 * per subscription, in the transaction that marks it processed. Events of every origin count:
 * ISiK 6 requires the repository-side ones, and the practice's own subscriptions need to hear
 * what requestors changed. Returns the subscriptions that got events. SKIP LOCKED lets replicas share the work; ids may commit out of order, so no high-water
 * mark.
 */
export async function fanOut(ctx: AppContext): Promise<Set<string>> {
  const touched = new Set<string>();
  for (;;) {
    const { count, ids } = await ctx.db.transaction(async (tx) => {
      const events = await claimPendingEvents(tx, BATCH);
      const got: string[] = [];
      for (const event of events) got.push(...(await numberOutboxEvent(ctx, tx, event)));
      await markProcessed(tx, events.map((e) => e.id), ctx.now());
      return { count: events.length, ids: got };
    });
    for (const id of ids) touched.add(id);
    if (count < BATCH) return touched;
  }
}

async function numberOutboxEvent(ctx: AppContext, tx: Db, row: PendingEvent): Promise<string[]> {
  const baseUrl = fhirBaseUrl(ctx.config);
  let focus: { resource: Appointment; deleted: boolean } | undefined | null = null;
  const numbered: string[] = [];
  for (const topic of topicsFor(row.type)) {
    const candidates = (await listeningChannels(tx, topic.url, row.occurredAt)).filter((c) => canSee(row.owner, subscriberOf(c.owner, ctx.config.repositoryOwners)));
    const matched: string[] = [];
    for (const c of candidates) {
      if (!c.filter) {
        matched.push(c.id);
        continue;
      }
      focus = focus === null ? await focusOf(tx, row) : focus;
      if (!focus) continue;
      try {
        if (matchesFilter(parseFilterCriteria(c.filter, topic), focus.resource, baseUrl)) matched.push(c.id);
      } catch {
        // A filter stored before a topic dropped a parameter matches nothing.
      }
    }
    if (matched.length === 0) continue;
    focus = focus === null ? await focusOf(tx, row) : focus;
    numbered.push(
      ...(await numberEvent(tx, matched, {
        outboxId: Number(row.id),
        topic: topic.url,
        focusType: row.resourceType,
        focusId: row.resourceId,
        focusVersion: row.versionId,
        deleted: focus?.deleted ?? false,
        occurredAt: row.occurredAt,
      })),
    );
  }
  return numbered;
}

/**
 * A Subscription hears about the appointments its institution may read: its
 * own and the repository's; the subscriptions of repository owners and of the repository itself
 * (no owner) hear all.
 */
/** A Subscription sees what its owner would; one the repository owns (`null`) sees all. */
function subscriberOf(subscriptionOwner: string | null, repositoryOwners: readonly string[]): Pick<Caller, 'institution' | 'isOwner' | 'patient'> | undefined {
  return subscriptionOwner === null ? undefined : { institution: subscriptionOwner, isOwner: repositoryOwners.includes(subscriptionOwner) };
}

async function focusOf(tx: Db, event: PendingEvent): Promise<{ resource: Appointment; deleted: boolean } | undefined> {
  const v = await readVersion(tx, event.resourceType, event.resourceId, event.versionId);
  return v && { resource: v.resource as Appointment, deleted: v.deleted };
}
