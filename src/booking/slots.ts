import type { Slot } from '@medplum/fhirtypes';
import type { Db } from '../store';
import type { Repository } from '../store';
import { referencedId } from '../shared/references';
import { epochMs, tstzrange, type Window } from './time';

/** A Slot as the booking sees it: the resource, its schedule and its time window. */
export interface SlotView {
  id: string;
  resource: Slot;
  scheduleId?: string;
  window?: Window;
}

export function viewOf(slot: Slot): SlotView {
  const start = epochMs(slot.start);
  const end = epochMs(slot.end);
  return {
    id: slot.id as string,
    resource: slot,
    scheduleId: referencedId(slot.schedule?.reference, 'Schedule'),
    window: start !== undefined && end !== undefined && start < end ? { start, end } : undefined,
  };
}

/** Ids of the schedule's slots overlapping the window, from the lookup table. */
export async function slotIdsOverlapping(db: Db, scheduleId: string, window: Window): Promise<string[]> {
  const { rows } = await db.query<{ slot_id: string }>(
    'SELECT slot_id FROM booking_slot WHERE schedule_id = $1 AND during && $2::tstzrange ORDER BY slot_id',
    [scheduleId, tstzrange(window)],
  );
  return rows.map((r) => r.slot_id);
}

/**
 * Locks the Slot resources in id order (one global order: concurrent bookings never deadlock on
 * them) and returns the current, not deleted ones.
 */
export async function lockSlots(repo: Repository, ids: string[]): Promise<Map<string, SlotView>> {
  const out = new Map<string, SlotView>();
  for (const id of [...new Set(ids)].sort()) {
    const row = await repo.readRow('Slot', id, { forUpdate: true });
    if (row && !row.deleted) out.set(id, viewOf(row.resource as Slot));
  }
  return out;
}

/** Writes a Slot change (the booking_slot trigger follows it). */
export async function writeSlot(repo: Repository, slot: Slot, create = false): Promise<Slot> {
  return create ? repo.create(slot) : (await repo.update(slot)).resource;
}
