import type { Slot } from '@medplum/fhirtypes';
import type { Repository } from '../store';
import { referencedId } from '../shared/references';
import { epochMs, type Window } from './time';

/** A Slot as the booking sees it: the resource, its schedule and its time window. */
export interface SlotView {
  id: string;
  resource: Slot;
  scheduleId?: string;
  window?: Window;
}

function viewOf(slot: Slot): SlotView {
  const start = epochMs(slot.start);
  const end = epochMs(slot.end);
  return {
    id: slot.id as string,
    resource: slot,
    scheduleId: referencedId(slot.schedule?.reference, 'Schedule'),
    window: start !== undefined && end !== undefined && start < end ? { start, end } : undefined,
  };
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
