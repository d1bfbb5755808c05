import { conflict } from '../shared/outcomes';
import { SqlState, sqlState, type Db } from '../store';
import { tstzrange, type Window } from './time';

export interface ScheduleWindow {
  scheduleId: string;
  window: Window;
}

/**
 * Records an active appointment's hold on its slots and schedule windows. The table constraints
 * (unique slot, exclusion on the schedule's time ranges) reject a concurrent overlapping booking
 * even when every application-level check passed: the loser answers 409.
 */
export async function reserve(db: Db, appointmentId: string, windows: ScheduleWindow[], slotIds: string[]): Promise<void> {
  try {
    for (const w of windows) {
      await db.query('INSERT INTO booking_reservation (appointment_id, schedule_id, during) VALUES ($1, $2, $3::tstzrange)', [
        appointmentId,
        w.scheduleId,
        tstzrange(w.window),
      ]);
    }
    for (const slotId of [...new Set(slotIds)]) {
      await db.query('INSERT INTO booking_slot_hold (slot_id, appointment_id) VALUES ($1, $2)', [slotId, appointmentId]);
    }
  } catch (err) {
    const state = sqlState(err);
    if (state === SqlState.exclusionViolation) throw conflict('The requested time is already booked in this schedule', 'Appointment.start');
    if (state === SqlState.uniqueViolation) throw conflict('The requested slot is already booked', 'Appointment.slot');
    throw err;
  }
}

/** Drops an appointment's holds; returns the slot ids it held. */
export async function release(db: Db, appointmentId: string): Promise<string[]> {
  await db.query('DELETE FROM booking_reservation WHERE appointment_id = $1', [appointmentId]);
  const { rows } = await db.query<{ slot_id: string }>('DELETE FROM booking_slot_hold WHERE appointment_id = $1 RETURNING slot_id', [appointmentId]);
  return rows.map((r) => r.slot_id);
}

/** The appointment holding a slot, if any. */
export async function holderOf(db: Db, slotId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ appointment_id: string }>('SELECT appointment_id FROM booking_slot_hold WHERE slot_id = $1', [slotId]);
  return rows[0]?.appointment_id;
}
