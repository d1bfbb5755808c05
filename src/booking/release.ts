import type { Slot } from '@medplum/fhirtypes';
import type { BookingContext } from './context';
import { lockSlots, writeSlot } from './slots';

/**
 * Ends an appointment's hold: its reservations go and the slots it held become free again
 * (in the caller's transaction, so a failed change keeps them held).
 */
export async function releaseHolds(c: BookingContext, appointmentId: string): Promise<string[]> {
  const slotIds = await c.tables.release(appointmentId);
  const { slots } = await lockSlots(c.repo, slotIds);
  for (const view of slots.values()) {
    if (view.resource.status === 'free') continue;
    const freed: Slot = { ...view.resource, status: 'free' };
    await writeSlot(c.repo, freed);
  }
  return slotIds;
}
