/** A Slot as `$book` needs it: its id and times, and the codes the Appointment carries. */
export interface BookableSlot {
  id: string;
  start?: string;
  end?: string;
  serviceType?: unknown[];
  specialty?: unknown[];
  schedule?: { reference?: string };
}

type Codes = Pick<BookableSlot, 'serviceType' | 'specialty'>;

/**
 * ISiKTermin requires `serviceType` (1..*) and a `specialty` coding; ISiKTerminblock makes both
 * optional on the Slot, ISiKKalender requires both on the Schedule. A Slot without them lends its
 * Schedule's, as the ISiK Stufe 5 test suite books (its Appointment carries the Schedule's
 * service type 177 and specialty NEUR). `readSchedule` reads a `Schedule/<id>` reference.
 */
export async function withScheduleCodes(slot: BookableSlot, readSchedule: (reference: string) => Promise<Codes>): Promise<BookableSlot> {
  if (present(slot.serviceType) && present(slot.specialty)) return slot;
  const reference = slot.schedule?.reference;
  if (!reference) return slot;
  const schedule = await readSchedule(reference);
  return {
    ...slot,
    serviceType: present(slot.serviceType) ? slot.serviceType : schedule.serviceType,
    specialty: present(slot.specialty) ? slot.specialty : schedule.specialty,
  };
}

const present = (v: unknown[] | undefined): v is unknown[] => Array.isArray(v) && v.length > 0;

/** The $book parameters for one slot and patient: serviceType and specialty taken from the slot. */
export function bookParameters(slot: BookableSlot, patient: string): Record<string, unknown> {
  return {
    resourceType: 'Parameters',
    parameter: [
      {
        name: 'appt-resource',
        resource: {
          resourceType: 'Appointment',
          status: 'proposed',
          start: slot.start,
          end: slot.end,
          ...(present(slot.serviceType) ? { serviceType: slot.serviceType } : {}),
          ...(present(slot.specialty) ? { specialty: slot.specialty } : {}),
          slot: [{ reference: `Slot/${slot.id}` }],
          participant: [{ actor: { reference: patient }, status: 'accepted' }],
        },
      },
    ],
  };
}
