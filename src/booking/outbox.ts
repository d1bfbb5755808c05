import type { Appointment } from '@medplum/fhirtypes';
import { appendEvent, type Db } from '../store';

export type AppointmentEventType = 'appointment.updated' | 'appointment.cancelled';
export type Origin = 'repository' | 'requestor';

export interface AppointmentChange {
  /** The version before the change; absent for a creation (which records nothing). */
  previous?: Appointment;
  /** The version after the change; absent for a deletion. */
  next?: Appointment;
  /** versionId the change produces. */
  versionId: number;
  origin: Origin;
  owner: string | null;
  at: Date;
}

/** The event a change stands for (migrations/200_booking.sql documents its consumers' rules; the outbox is the store's). */
function eventOf(change: Pick<AppointmentChange, 'previous' | 'next'>): AppointmentEventType | undefined {
  const { previous, next } = change;
  if (!previous) return undefined;
  if (!next) return previous.status === 'cancelled' ? undefined : 'appointment.cancelled';
  if (next.status === 'cancelled' && previous.status !== 'cancelled') return 'appointment.cancelled';
  return 'appointment.updated';
}

/** Writes the domain event in the caller's transaction. */
export async function recordAppointmentChange(db: Db, change: AppointmentChange): Promise<AppointmentEventType | undefined> {
  const type = eventOf(change);
  if (!type) return undefined;
  const id = (change.next ?? change.previous)!.id as string;
  await appendEvent(db, { type, resourceType: 'Appointment', resourceId: id, versionId: change.versionId, origin: change.origin, owner: change.owner, occurredAt: change.at });
  return type;
}
