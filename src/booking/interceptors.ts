import { deepEquals } from '@medplum/core';
import type { Appointment, Patient, Slot } from '@medplum/fhirtypes';
import { conflict, forbidden, issue, OperationOutcomeError, unprocessable } from '../server-lib/outcomes';
import type { SearchRequest, WriteEvent, WriteInterceptor } from '../store';
import { actsForRepository, bookingContext, originOf, type BookingContext } from './context';
import { changedImmutables } from './immutables';
import { recordAppointmentChange } from './outbox';
import { checkActiveParticipants } from './patients';
import { referencedId } from '../server-lib/references';
import { releaseHolds } from './release';
import { bookingTables } from './tables';
import { lockSlots, writeSlot } from './slots';
import { holdsTime } from './status';
import { epochMs, type Window } from './time';

/**
 * Booking rules for every write of an Appointment, Slot or Patient from any route (REST,
 * transaction Bundle, PATCH, import, jobs): nothing bypasses the reservations, the immutable
 * elements or the confirmation workflow. The booking's own writes (origin `booking`) already
 * follow them.
 */
export function bookingInterceptors(): WriteInterceptor[] {
  const unlessOwn = (rule: (event: WriteEvent) => Promise<void>) => (event: WriteEvent) => (event.origin === 'booking' ? Promise.resolve() : rule(event));
  return [
    { name: 'booking: appointments', types: ['Appointment'], beforeWrite: unlessOwn(onAppointmentWrite) },
    { name: 'booking: held slots', types: ['Slot'], beforeWrite: unlessOwn(onSlotWrite) },
    { name: 'booking: inactive patients', types: ['Patient'], beforeWrite: unlessOwn(onPatientWrite) },
  ];
}

async function onAppointmentWrite(event: WriteEvent): Promise<void> {
  const c = bookingContext(event.repo, event.writer);
  const previous = event.previous as Appointment | undefined;
  const next = event.resource as Appointment | undefined;
  const wasHolding = holdsTime(previous);
  const willHold = holdsTime(next);

  if (previous && next) {
    // ISiK 6.0.0: 400 with a coded issue naming the element.
    const changed = changedImmutables(previous, next);
    if (changed.length) {
      throw new OperationOutcomeError(
        400,
        changed.map((e) => issue('business-rule', `${e} must not be changed; send the appointment with the same id to Appointment/$book to move it`, e)),
      );
    }
  }
  if (c.caller?.patient !== undefined) onlyACancellation(previous, next);
  if (next && !actsForRepository(c.caller)) {
    // Only the repository and its owners move appointments in and out of pending.
    if (previous && previous.status !== 'pending' && next.status === 'pending') {
      throw forbidden('Only the repository puts an appointment in pending');
    }
    if (!wasHolding && willHold) throw unprocessable('Appointments are booked through Appointment/$book', 'Appointment.status');
    if (previous?.status === 'pending' && next.status !== 'pending' && next.status !== 'cancelled') {
      throw forbidden('Only the repository confirms a pending appointment');
    }
    // The patient cannot change later (immutable), so it is checked when the appointment is made.
    if (!previous) await checkActiveParticipants(c, next.participant ?? [], 'Patient');
  }
  if (next && willHold && !wasHolding && event.interaction === 'create') {
    throw unprocessable('An appointment that holds its slots is created through Appointment/$book or PUT with an id', 'Appointment.status');
  }

  if (wasHolding && (!next || !willHold)) await releaseHolds(c, previous!.id as string);
  if (next && willHold && !wasHolding) await holdFor(c, next);

  if (previous) {
    const row = await c.repo.readRow('Appointment', previous.id as string);
    await recordAppointmentChange(c.repo.db, {
      previous,
      next,
      versionId: (row?.versionId ?? Number(previous.meta?.versionId ?? 0)) + 1,
      origin: originOf(c.caller),
      owner: row?.owner ?? null,
      at: c.now,
    });
  }
}

/** What a patient may change of their own appointment besides its status (they may cancel it). */
const PATIENT_MAY_SET = ['status', 'cancelationReason', 'comment', 'meta', 'text'] as const;

/**
 * A patient books through `$book` and cancels their own appointment; they neither
 * create one by REST nor change anything else of it (403).
 */
function onlyACancellation(previous: Appointment | undefined, next: Appointment | undefined): void {
  if (!previous || !next) throw forbidden('A patient books through Appointment/$book and cancels by PATCH; nothing else');
  const rest = (a: Appointment) => Object.fromEntries(Object.entries(a).filter(([k]) => !(PATIENT_MAY_SET as readonly string[]).includes(k)));
  if (next.status !== 'cancelled' || !deepEquals(rest(previous), rest(next))) {
    throw forbidden('A patient may only cancel their appointment: status cancelled, with a cancelationReason or comment at most');
  }
}

/** An owner (or an import) storing an active appointment: it holds its slots like a booking. */
async function holdFor(c: BookingContext, appointment: Appointment): Promise<void> {
  const ids = (appointment.slot ?? []).map((s) => referencedId(s.reference, 'Slot')).filter((id): id is string => !!id);
  const slots = [...(await lockSlots(c.repo, ids)).slots.values()];
  const start = epochMs(appointment.start);
  const end = epochMs(appointment.end);
  const own: Window | undefined = start !== undefined && end !== undefined && start < end ? { start, end } : undefined;
  const windows = slots.filter((s) => s.scheduleId && (own || s.window)).map((s) => ({ scheduleId: s.scheduleId!, window: own ?? s.window! }));
  const bySchedule = new Map(windows.map((w) => [w.scheduleId, w]));
  await c.tables.reserve(appointment.id as string, [...bySchedule.values()], slots.map((s) => s.id));
  for (const view of slots) {
    if (view.resource.status !== 'free') continue;
    const busy: Slot = { ...view.resource, status: 'busy' };
    await writeSlot(c.repo, busy);
  }
}

/** A slot held by an active appointment keeps its time and schedule and is not freed or deleted. */
async function onSlotWrite(event: WriteEvent): Promise<void> {
  if (!event.previous) return;
  const previous = event.previous as Slot;
  const holder = await bookingTables(event.repo.db).holderOf(previous.id as string);
  if (!holder) return;
  const next = event.resource as Slot | undefined;
  const what = !next
    ? 'deleted'
    : next.status === 'free'
      ? 'set free'
      : epochMs(next.start) !== epochMs(previous.start) || epochMs(next.end) !== epochMs(previous.end) || next.schedule?.reference !== previous.schedule?.reference
        ? 'moved'
        : undefined;
  if (what) throw conflict(`Slot/${previous.id} is held by Appointment/${holder} and cannot be ${what}; cancel the appointment first`, 'Slot.status');
}

/**
 * docs/requirements.md, Booking ($book): the participant rules hold "also afterwards for provisionally created patients": a patient deactivated or
 * deleted takes its future active appointments with it (cancelled, slots freed, event recorded).
 */
async function onPatientWrite(event: WriteEvent): Promise<void> {
  if (!event.previous) return;
  const wasActive = (event.previous as Patient).active !== false;
  const isActive = !!event.resource && (event.resource as Patient).active !== false;
  if (!wasActive || isActive) return;
  const c = bookingContext(event.repo, event.writer);
  const c2: BookingContext = { ...c, caller: undefined };
  const found = await c.repo.search(appointmentsOf(event.previous.id as string));
  for (const a of found.resources as Appointment[]) {
    if ((epochMs(a.start) ?? Infinity) <= c.now.getTime()) continue;
    const row = await c.repo.readRow('Appointment', a.id as string, { forUpdate: true });
    if (!row || row.deleted || !holdsTime(row.resource as Appointment)) continue;
    const current = row.resource as Appointment;
    const cancelled: Appointment = { ...current, status: 'cancelled' };
    await releaseHolds(c2, current.id as string);
    const stored = (await c.repo.update(cancelled)).resource;
    await recordAppointmentChange(c.repo.db, { previous: current, next: stored, versionId: Number(stored.meta?.versionId), origin: 'repository', owner: row.owner, at: c.now });
  }
}

function appointmentsOf(patientId: string): SearchRequest {
  return {
    resourceType: 'Appointment',
    filters: [
      { chain: [], param: 'patient', values: [`Patient/${patientId}`] },
      { chain: [], param: 'status', values: ['booked', 'pending', 'arrived', 'checked-in'] },
    ],
    count: 1000,
    offset: 0,
    sort: [],
    include: [],
    revinclude: [],
    totalOnly: false,
  };
}
