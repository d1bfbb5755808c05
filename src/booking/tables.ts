import { conflict } from '../server-lib/outcomes';
import { alongsideStatement, SqlState, sqlState, type Alongside, type Db } from '../store';
import { tstzrange, type Window } from './time';

export interface ScheduleWindow {
  scheduleId: string;
  window: Window;
}

/**
 * The booking's own tables (migrations/200_booking.sql), its only SQL: the holds of active
 * appointments on slots and schedule windows, the slot lookup the database keeps in step with
 * Slot writes, and per-identifier locks. Bound to the caller's transaction.
 */
export interface BookingTables {
  /**
   * Records an active appointment's hold on its slots and schedule windows. The table constraints
   * (unique slot, exclusion on the schedule's time ranges) reject a concurrent overlapping booking
   * even when every application-level check passed: the loser answers 409.
   */
  reserve(appointmentId: string, windows: ScheduleWindow[], slotIds: string[]): Promise<void>;
  /**
   * The same holds as rows to write alongside the appointment's own write (`WriteOptions.alongside`,
   * one statement); a failure of that write goes through `explain` (409 for a lost race).
   */
  reservation(windows: ScheduleWindow[], slotIds: string[]): { alongside: (appointmentId: string) => Alongside; explain: (err: unknown) => unknown };
  /** Drops an appointment's holds; returns the slot ids it held. */
  release(appointmentId: string): Promise<string[]>;
  /** The appointment holding a slot, if any. */
  holderOf(slotId: string): Promise<string | undefined>;
  /** Ids of the schedule's slots overlapping the window, in id order. */
  slotsOverlapping(scheduleId: string, window: Window): Promise<string[]>;
  /**
   * Transaction-scoped locks per patient identifier (sorted, so two bookings with overlapping
   * identifiers cannot deadlock): two bookings bringing the same new patient do not both create it.
   */
  lockIdentifiers(identifiers: string[]): Promise<void>;
  /**
   * Up to `limit` free slots that ended before `cutoff` and that no Appointment names (booked and
   * cancelled appointments keep their slots), oldest first, their resource rows locked; rows
   * another transaction holds are skipped, so two replicas retiring at once take different slots.
   */
  retirableSlots(cutoff: Date, limit: number): Promise<{ id: string; owned: boolean }[]>;
  /** Drops the lookup rows of expunged slots (the mirror trigger sees no DELETE). */
  forgetSlots(ids: string[]): Promise<void>;
}

export function bookingTables(db: Db): BookingTables {
  return {
    async reserve(appointmentId, windows, slotIds) {
      const { sql, params } = alongsideStatement(holds(appointmentId, windows, slotIds));
      try {
        await db.query(sql, params, { prepare: true });
      } catch (err) {
        throw explainHoldError(err);
      }
    },
    reservation(windows, slotIds) {
      return { alongside: (appointmentId) => holds(appointmentId, windows, slotIds), explain: explainHoldError };
    },
    async release(appointmentId) {
      await db.query('DELETE FROM booking_reservation WHERE appointment_id = $1', [appointmentId], { prepare: true });
      const { rows } = await db.query<{ slot_id: string }>('DELETE FROM booking_slot_hold WHERE appointment_id = $1 RETURNING slot_id', [appointmentId], { prepare: true });
      return rows.map((r) => r.slot_id);
    },
    async holderOf(slotId) {
      const { rows } = await db.query<{ appointment_id: string }>('SELECT appointment_id FROM booking_slot_hold WHERE slot_id = $1', [slotId], { prepare: true });
      return rows[0]?.appointment_id;
    },
    async slotsOverlapping(scheduleId, window) {
      const { rows } = await db.query<{ slot_id: string }>(
        // A slot of at most a day starts at most a day before the window (the B-tree of short slots);
        // longer ones are found through their GiST index (migrations/204_booking_slot_cheaper.sql).
        `SELECT slot_id FROM booking_slot
          WHERE schedule_id = $1 AND short AND during && $2::tstzrange
            AND lower(during) >= coalesce(lower($2::tstzrange) - interval '24 hours', '-infinity') AND lower(during) <= coalesce(upper($2::tstzrange), 'infinity')
         UNION ALL
         SELECT slot_id FROM booking_slot WHERE schedule_id = $1 AND NOT short AND during && $2::tstzrange
         ORDER BY slot_id`,
        [scheduleId, tstzrange(window)],
        { prepare: true },
      );
      return rows.map((r) => r.slot_id);
    },
    async retirableSlots(cutoff, limit) {
      const { rows } = await db.query<{ id: string; owned: boolean }>(
        `SELECT r.id, r.owner IS NOT NULL AS owned
           FROM booking_slot b
           JOIN resource r ON r.resource_type = 'Slot' AND r.id = b.slot_id
          WHERE b.status = 'free' AND upper(b.during) < $1
            AND NOT EXISTS (SELECT 1 FROM search_reference a WHERE a.target_type = 'Slot' AND a.target_id = b.slot_id AND a.resource_type = 'Appointment')
          ORDER BY upper(b.during), b.slot_id
          LIMIT $2
            FOR UPDATE OF r SKIP LOCKED`,
        [cutoff.toISOString(), limit],
      );
      return rows;
    },
    async forgetSlots(ids) {
      await db.query('DELETE FROM booking_slot WHERE slot_id = ANY($1::text[])', [ids]);
    },
    async lockIdentifiers(identifiers) {
      for (const key of [...new Set(identifiers)].sort()) {
        await db.query("SELECT pg_advisory_xact_lock(hashtextextended('Patient.identifier|' || $1, 0))", [key], { prepare: true });
      }
    },
  };
}

/**
 * The booking's windows and slot holds of one appointment, as two inserts sharing their
 * parameters: the table constraints check both.
 */
function holds(appointmentId: string, windows: ScheduleWindow[], slotIds: string[]): Alongside {
  return {
    statements: [
      'INSERT INTO booking_reservation (appointment_id, schedule_id, during) SELECT $1, w.schedule_id, w.during::tstzrange FROM unnest($2::text[], $3::text[]) AS w(schedule_id, during)',
      'INSERT INTO booking_slot_hold (slot_id, appointment_id) SELECT DISTINCT s.slot_id, $1 FROM unnest($4::text[]) AS s(slot_id)',
    ],
    params: [appointmentId, windows.map((w) => w.scheduleId), windows.map((w) => tstzrange(w.window)), slotIds],
  };
}

/** A hold a concurrent booking won (the constraint of its table): 409; anything else as it is. */
function explainHoldError(err: unknown): unknown {
  const state = sqlState(err);
  const table = (err as { table?: unknown } | null)?.table;
  if (state === SqlState.exclusionViolation && table === 'booking_reservation') return conflict('The requested time is already booked in this schedule', 'Appointment.start');
  if (state === SqlState.uniqueViolation && (table === 'booking_slot_hold' || table === 'booking_reservation')) return conflict('The requested slot is already booked', 'Appointment.slot');
  return err;
}
