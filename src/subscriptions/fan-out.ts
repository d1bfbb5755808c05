import type { Appointment } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { AppointmentEventType } from '../booking';
import type { Db } from '../store';
import { canSee, type Viewer } from '../shared/owner';
import { listeningChannels } from './channel-store';
import { numberEvent } from './event-store';
import { matchesFilter, parseFilterCriteria } from './filter-criteria';
import { topicsFor } from './topics';
import { fhirBaseUrl } from '../config';

interface OutboxRow {
  id: string | number;
  event_type: AppointmentEventType;
  resource_type: string;
  resource_id: string;
  version_id: number;
  owner: string | null;
  occurred_at: Date | string;
}

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
      const { rows } = await tx.query<OutboxRow>(
        `SELECT id, event_type, resource_type, resource_id, version_id, owner, occurred_at FROM booking_outbox
          WHERE processed_at IS NULL ORDER BY id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
      );
      const got: string[] = [];
      for (const row of rows) got.push(...(await numberOutboxEvent(ctx, tx, row)));
      if (rows.length) {
        await tx.query('UPDATE booking_outbox SET processed_at = $2 WHERE id = ANY($1::bigint[])', [rows.map((r) => String(r.id)), ctx.now().toISOString()]);
      }
      return { count: rows.length, ids: got };
    });
    for (const id of ids) touched.add(id);
    if (count < BATCH) return touched;
  }
}

async function numberOutboxEvent(ctx: AppContext, tx: Db, row: OutboxRow): Promise<string[]> {
  const baseUrl = fhirBaseUrl(ctx.config);
  let focus: { resource: Appointment; deleted: boolean } | undefined | null = null;
  const numbered: string[] = [];
  for (const topic of topicsFor(row.event_type)) {
    const candidates = (await listeningChannels(tx, topic.url, new Date(row.occurred_at))).filter((c) => canSee(row.owner, subscriberOf(c.owner, ctx.config.repositoryOwners)));
    const matched: string[] = [];
    for (const c of candidates) {
      if (!c.filter) {
        matched.push(c.id);
        continue;
      }
      focus = focus === null ? await readVersion(tx, row) : focus;
      if (!focus) continue;
      try {
        if (matchesFilter(parseFilterCriteria(c.filter, topic), focus.resource, baseUrl)) matched.push(c.id);
      } catch {
        // A filter stored before a topic dropped a parameter matches nothing.
      }
    }
    if (matched.length === 0) continue;
    focus = focus === null ? await readVersion(tx, row) : focus;
    numbered.push(
      ...(await numberEvent(tx, matched, {
        outboxId: Number(row.id),
        topic: topic.url,
        focusType: row.resource_type,
        focusId: row.resource_id,
        focusVersion: row.version_id,
        deleted: focus?.deleted ?? false,
        occurredAt: new Date(row.occurred_at),
      })),
    );
  }
  return numbered;
}

/**
 * CONTRACT section 4: a Subscription hears about the appointments its institution may read: its
 * own and the repository's; the subscriptions of repository owners and of the repository itself
 * (no owner) hear all.
 */
/** A Subscription sees what its owner would; one the repository owns (`null`) sees all. */
function subscriberOf(subscriptionOwner: string | null, repositoryOwners: readonly string[]): Viewer | undefined {
  return subscriptionOwner === null ? undefined : { institution: subscriptionOwner, seesAll: repositoryOwners.includes(subscriptionOwner) };
}

async function readVersion(tx: Db, row: OutboxRow): Promise<{ resource: Appointment; deleted: boolean } | undefined> {
  const { rows } = await tx.query<{ content: Appointment; deleted: boolean }>(
    'SELECT content, deleted FROM resource_version WHERE resource_type = $1 AND id = $2 AND version_id = $3',
    [row.resource_type, row.resource_id, row.version_id],
  );
  return rows[0] && { resource: rows[0].content, deleted: rows[0].deleted };
}
