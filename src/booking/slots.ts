import type { Slot } from '@medplum/fhirtypes';
import type { Repository, StoredRow } from '../store';
import { referencedId } from '../server-lib/references';
import { epochMs, type Window } from './time';

/** A Slot as the booking sees it: the resource, its schedule and its time window. */
export interface SlotView {
  id: string;
  resource: Slot;
  scheduleId?: string;
  window?: Window;
  /** The row of its Schedule, read with the lock when the reference names one here. */
  schedule?: StoredRow;
}

function viewOf(slot: Slot, schedule?: StoredRow & { id: string }): SlotView {
  const start = epochMs(slot.start);
  const end = epochMs(slot.end);
  const scheduleId = referencedId(slot.schedule?.reference, 'Schedule');
  return {
    id: slot.id as string,
    resource: slot,
    scheduleId,
    window: start !== undefined && end !== undefined && start < end ? { start, end } : undefined,
    ...(schedule && schedule.id === scheduleId ? { schedule } : {}),
  };
}

/**
 * Locks the Slot resources in id order (one global order: concurrent bookings never deadlock on
 * them) and returns the current, not deleted ones, each with its Schedule's row read in the same
 * statement; `read`: other rows to read (unlocked) in that statement, by `Type/id`.
 */
export async function lockSlots(
  repo: Repository,
  ids: string[],
  read: { type: string; id: string }[] = [],
): Promise<{ slots: Map<string, SlotView>; read: Map<string, StoredRow | undefined> }> {
  const slots = new Map<string, SlotView>();
  const rows = await repo.lockRows('Slot', ids, { path: ['schedule', 'reference'], type: 'Schedule' }, read);
  for (const [id, { row, followed }] of rows.locked) if (!row.deleted) slots.set(id, viewOf(row.resource as Slot, followed));
  return { slots, read: rows.read };
}

/** Writes a Slot change (the booking_slot trigger follows it). */
export async function writeSlot(repo: Repository, slot: Slot, create = false): Promise<Slot> {
  return create ? repo.create(slot) : (await repo.update(slot)).resource;
}
