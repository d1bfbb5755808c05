import type { Appointment, HealthcareService, Patient, QuestionnaireResponse, Reference, RelatedPerson, Schedule, Slot } from '@medplum/fhirtypes';
import { badRequest, conflict, notFound, OperationOutcomeError, unprocessable } from '../server-lib/outcomes';
import { validateResource } from '../model';
import { isFhirId } from '../server-lib/fhir-id';
import { canSee } from '../server-lib/owner';
import { actsForRepository, originOf, ownerOf, type BookingContext } from './context';
import { recordAppointmentChange } from './outbox';
import { checkActiveParticipants, onlyThePatient, participantKeys, ownPatientParameter, resolvePatientParameter, withPatientParticipant } from './patients';
import { checkProposal } from './proposal';
import { referencedId } from '../server-lib/references';
import { releaseHolds } from './release';
import { lockSlots, writeSlot, type SlotView } from './slots';
import type { StoredRow } from '../store';
import { EXTERNAL_TAG, holdsTime } from './status';
import { BOOKING_CONFIRMATION_URL, REPLACES_URL } from '../common/vocabulary';
import { covers, instant, overlaps, type Window } from './time';

/** The inputs of ISiK Terminplanung 6.0.0 `Appointment/$book`. */
export interface BookInput {
  appointment: Appointment;
  /** id of the appointment this booking replaces (cancelled in the same transaction). */
  cancelledAppointmentId?: string;
  /** Schedule id: without `Appointment.slot` the repository finds the slots in it. */
  scheduleId?: string;
  patient?: Patient;
  relatedPerson?: RelatedPerson;
  patientSubmittedInformation?: QuestionnaireResponse;
}

export interface BookResult {
  appointment: Appointment;
  /** `pending` (HTTP 202): the schedule needs manual confirmation. */
  pending: boolean;
}

/**
 * Books an appointment in one transaction: re-book in place (same id) or replace another
 * (`cancelled-appt-id`), take the slots (slot mode) or find and split them (schedule mode),
 * record the holds the database constraints guard, and store the Appointment `booked` or
 * `pending`. Any failure rolls everything back: the old appointment stays untouched.
 */
export async function book(c: BookingContext, input: BookInput): Promise<BookResult> {
  const proposal = input.appointment;
  const window = checkProposal(proposal, c.now);
  const { repo } = c;

  const rebooked = proposal.id ? await lockAppointment(c, proposal.id) : undefined;
  const replaced = input.cancelledAppointmentId ? await lockReplaced(c, input.cancelledAppointmentId, proposal.id) : undefined;
  if (rebooked?.resource) await releaseHolds(c, rebooked.resource.id as string);
  if (replaced) await releaseHolds(c, replaced.resource.id as string);

  let participants = proposal.participant ?? [];
  // A patient books for their own Patient, named or not.
  const given = c.caller?.patient !== undefined ? ownPatientParameter(c.caller.patient, input.patient) : input.patient;
  if (given) {
    const resolved = await resolvePatientParameter(c, given);
    participants = withPatientParticipant(proposal, given, resolved);
    if (c.caller?.patient !== undefined) onlyThePatient(participants, resolved);
  }
  // The slots (named, or the schedule's in the window) are locked and the participants and the
  // schedule parameter read in one statement (fewer round trips per booking); the checks then run in their order.
  const slotIds = proposal.slot?.length ? slotIdsOf(proposal.slot) : undefined;
  if (!slotIds && !input.scheduleId) throw badRequest('Appointment.slot is missing and no schedule parameter names the calendar to book in', 'Appointment.slot', 'required');
  const candidates = slotIds ?? (await c.tables.slotsOverlapping(input.scheduleId!, window));
  const reads = [...participantKeys(participants), ...(input.scheduleId ? [{ type: 'Schedule', id: input.scheduleId }] : [])];
  const { slots: locked, read } = await lockSlots(c.repo, candidates, reads);
  await checkActiveParticipants(c, participants, 'Patient', read);
  await checkActiveParticipants(c, participants, 'HealthcareService', read);
  if (input.scheduleId) checkScheduleParameter(c, input.scheduleId, read.get(`Schedule/${input.scheduleId}`));

  const slots = slotIds ? await takeSlots(c, slotIds, locked, window, input.scheduleId) : await findSlots(c, input.scheduleId!, window, candidates, locked);
  const schedules = await checkSchedules(c, slots);
  const pending = schedules.some(needsManualConfirmation);

  const patientRef = participants.map((p) => p.actor?.reference).find((r) => referencedId(r, 'Patient'));
  const supportingInformation = [...(proposal.supportingInformation ?? [])];
  if (input.relatedPerson) supportingInformation.push(await storeRelatedPerson(c, input.relatedPerson, patientRef));
  if (input.patientSubmittedInformation) supportingInformation.push(await storeSubmittedInformation(c, input.patientSubmittedInformation, patientRef));

  const extension = (proposal.extension ?? []).filter((e) => e.url !== REPLACES_URL);
  if (replaced) extension.push({ url: REPLACES_URL, valueReference: { reference: `Appointment/${replaced.resource.id}` } });

  const { meta, ...rest } = proposal;
  const appointment: Appointment = {
    ...rest,
    ...(proposal.id ? { id: proposal.id } : {}),
    meta: bookedMeta(meta, c),
    status: pending ? 'pending' : 'booked',
    slot: slots.map((s) => ({ reference: `Slot/${s.id}` })),
    participant: participants,
    ...(supportingInformation.length ? { supportingInformation } : {}),
    ...(extension.length ? { extension } : {}),
  };
  // The holds are written by the appointment's own statement; a concurrent booking that won them: 409.
  const holds = c.tables.reservation(scheduleWindows(slots, window), slots.map((s) => s.id));
  const opts = { owner: ownerOf(c.caller, 'Appointment'), alongside: holds.alongside };
  let stored: Appointment;
  try {
    // A new appointment gets its id here (create: no row to read); a re-booking keeps its own.
    stored = proposal.id ? (await repo.update(appointment, opts)).resource : await repo.create(appointment, opts);
  } catch (err) {
    throw holds.explain(err);
  }

  if (rebooked?.resource) {
    await recordAppointmentChange(repo.db, { previous: rebooked.resource, next: stored, versionId: Number(stored.meta?.versionId), origin: originOf(c.caller), owner: rebooked.owner, at: c.now });
  }
  if (replaced) await cancelReplaced(c, replaced.resource, replaced.owner);
  return { appointment: stored, pending };
}

async function lockAppointment(c: BookingContext, id: string): Promise<{ resource?: Appointment; owner: string | null } | undefined> {
  if (!isFhirId(id)) throw badRequest(`Invalid id "${id}"`, 'Appointment.id', 'value');
  const row = await c.repo.readRow('Appointment', id, { forUpdate: true });
  if (!row) return undefined;
  if (!canSee(row.owner, c.caller, row.resource)) throw notFound('Appointment', id);
  return { resource: row.deleted ? undefined : (row.resource as Appointment), owner: row.owner };
}

async function lockReplaced(c: BookingContext, id: string, newId: string | undefined): Promise<{ resource: Appointment; owner: string | null }> {
  const expression = "Parameters.parameter.where(name='cancelled-appt-id')";
  if (id === newId) throw badRequest('cancelled-appt-id names the appointment being booked; re-book it by its id instead', expression);
  const row = await c.repo.readRow('Appointment', id, { forUpdate: true });
  if (!row || row.deleted || !canSee(row.owner, c.caller, row.resource)) throw unprocessable(`Appointment/${id} to be cancelled does not exist`, expression, 'not-found');
  const resource = row.resource as Appointment;
  if (!holdsTime(resource)) throw unprocessable(`Appointment/${id} is ${resource.status} and cannot be replaced`, expression);
  return { resource, owner: row.owner };
}

async function cancelReplaced(c: BookingContext, old: Appointment, owner: string | null): Promise<void> {
  const cancelled: Appointment = { ...old, status: 'cancelled' };
  const stored = (await c.repo.update(cancelled)).resource;
  await recordAppointmentChange(c.repo.db, { previous: old, next: stored, versionId: Number(stored.meta?.versionId), origin: originOf(c.caller), owner, at: c.now });
}

/** The ids of `Appointment.slot`, in its order (400 for a reference to anything else). */
function slotIdsOf(refs: Reference[]): string[] {
  return refs.map((r, i) => {
    const id = referencedId(r.reference, 'Slot');
    if (!id) throw badRequest(`Appointment.slot[${i}] must reference a Slot of this repository`, `Appointment.slot[${i}]`);
    return id;
  });
}

/**
 * Slot mode: every referenced Slot (`ids`, in `Appointment.slot` order; `locked` by lockSlots)
 * exists, is free and overlaps the window (a slot beside the appointment would be made busy for
 * nothing), and together they contain the window.
 */
async function takeSlots(c: BookingContext, ids: string[], locked: Map<string, SlotView>, window: Window, scheduleId?: string): Promise<SlotView[]> {
  const views = [...new Set(ids)].map((id) => {
    const i = ids.indexOf(id);
    const view = locked.get(id);
    if (!view) throw unprocessable(`Slot/${id} does not exist`, `Appointment.slot[${i}]`, 'not-found');
    if (view.resource.status !== 'free') throw conflict(`Slot/${id} is not free (${view.resource.status})`, `Appointment.slot[${i}]`);
    if (!view.window) throw unprocessable(`Slot/${id} has no valid start and end`, `Appointment.slot[${i}]`);
    if (!overlaps(view.window, window)) throw unprocessable(`Slot/${id} does not overlap the appointment's time`, `Appointment.slot[${i}]`);
    if (scheduleId && view.scheduleId !== scheduleId) throw unprocessable(`Slot/${id} does not belong to Schedule/${scheduleId}`, `Appointment.slot[${i}]`);
    return view;
  });
  if (!covers(views.map((v) => v.window!), window)) throw unprocessable('The appointment does not lie within its slots', 'Appointment.slot');
  for (const view of views) {
    const busy: Slot = { ...view.resource, status: 'busy' };
    view.resource = await writeSlot(c.repo, busy);
  }
  return views;
}

/**
 * Schedule mode (ISiK 6.0.0 $book `schedule`): the free slots of the schedule covering the window
 * (`candidates` found by the booking's slot lookup, `locked` by lockSlots) are cut to it; what
 * lies outside stays free as new slots. Any busy slot in the window: 409.
 */
async function findSlots(c: BookingContext, scheduleId: string, window: Window, candidates: string[], locked: Map<string, SlotView>): Promise<SlotView[]> {
  const inWindow = [...locked.values()].filter((v) => v.scheduleId === scheduleId && v.window && overlaps(v.window, window));
  const taken = inWindow.filter((v) => v.resource.status !== 'free');
  if (taken.length) throw conflict(`The requested time is not free: ${taken.map((v) => `Slot/${v.id} is ${v.resource.status}`).join(', ')}`, 'Appointment.start');
  if (!covers(inWindow.map((v) => v.window!), window)) {
    // Slots that moved away since the lookup were taken by a concurrent booking.
    if (inWindow.length < candidates.length) throw conflict('The requested time was booked meanwhile', 'Appointment.start');
    throw unprocessable(`No free slots of Schedule/${scheduleId} cover the requested time`, 'Appointment.start');
  }
  const booked: SlotView[] = [];
  for (const view of inWindow.sort((a, b) => a.window!.start - b.window!.start)) {
    const w = view.window!;
    const part = { start: Math.max(w.start, window.start), end: Math.min(w.end, window.end) };
    for (const rest of [{ start: w.start, end: window.start }, { start: window.end, end: w.end }]) {
      if (rest.start >= rest.end) continue;
      const { id: _id, meta, ...copy } = view.resource;
      const free: Slot = { ...copy, meta: meta?.profile ? { profile: meta.profile, ...(meta.tag ? { tag: meta.tag } : {}) } : undefined, status: 'free', start: instant(rest.start), end: instant(rest.end) };
      await writeSlot(c.repo, free, true);
    }
    const busy: Slot = { ...view.resource, status: 'busy', start: instant(part.start), end: instant(part.end) };
    booked.push({ ...view, resource: await writeSlot(c.repo, busy), window: part });
  }
  return booked;
}

/** ISiK 6.0.0 $book `schedule`: the calendar named must exist (422 not-found, as a missing slot). */
function checkScheduleParameter(c: BookingContext, id: string, row: StoredRow | undefined): void {
  if (!row || row.deleted || !canSee(row.owner, c.caller, row.resource)) {
    throw unprocessable(`Schedule/${id} named by the schedule parameter does not exist`, "Parameters.parameter.where(name='schedule')", 'not-found');
  }
}

/** Inactive or missing calendars (and their HealthcareService actors) take no bookings. */
async function checkSchedules(c: BookingContext, slots: SlotView[]): Promise<Schedule[]> {
  const schedules: Schedule[] = [];
  for (const id of [...new Set(slots.map((s) => s.scheduleId))]) {
    if (!id) throw unprocessable('A slot of the appointment belongs to no Schedule', 'Appointment.slot');
    // Read with the slot's lock (slots.ts) where the reference named a Schedule here.
    const row = slots.find((s) => s.scheduleId === id && s.schedule)?.schedule ?? (await c.repo.readRow('Schedule', id));
    if (!row || row.deleted) throw unprocessable(`Schedule/${id} does not exist`, 'Appointment.slot', 'not-found');
    const schedule = row.resource as Schedule;
    if (schedule.active === false) throw unprocessable(`Schedule/${id} is not active`, 'Appointment.slot');
    for (const actor of schedule.actor ?? []) {
      const serviceId = referencedId(actor.reference, 'HealthcareService');
      if (!serviceId) continue;
      const service = await c.repo.readRow('HealthcareService', serviceId);
      if (!service || service.deleted || (service.resource as HealthcareService).active === false) {
        throw unprocessable(`HealthcareService/${serviceId} of Schedule/${id} is not active`, 'Appointment.slot');
      }
    }
    schedules.push(schedule);
  }
  return schedules;
}

function needsManualConfirmation(schedule: Schedule): boolean {
  return (schedule.extension ?? []).some((e) => e.url === BOOKING_CONFIRMATION_URL && e.valueCode === 'manual');
}

/** The appointment's window in each schedule it books. */
function scheduleWindows(slots: SlotView[], window: Window): { scheduleId: string; window: Window }[] {
  return [...new Set(slots.map((s) => s.scheduleId as string))].map((scheduleId) => ({ scheduleId, window }));
}

function bookedMeta(meta: Appointment['meta'], c: BookingContext): Appointment['meta'] {
  const tags = [...(meta?.tag ?? [])];
  // Resources created by a requesting institution are external to the practice system (ISiK).
  if (!actsForRepository(c.caller) && !tags.some((t) => t.system === EXTERNAL_TAG.system && t.code === EXTERNAL_TAG.code)) tags.push({ ...EXTERNAL_TAG });
  const out: NonNullable<Appointment['meta']> = {};
  if (meta?.profile) out.profile = meta.profile;
  if (tags.length) out.tag = tags;
  if (meta?.security) out.security = meta.security;
  return Object.keys(out).length ? out : undefined;
}

async function storeRelatedPerson(c: BookingContext, person: RelatedPerson, patientRef: string | undefined): Promise<Reference> {
  const { id: _id, meta: _meta, ...rest } = person;
  // RelatedPerson.patient is 1..1: the booked patient when the client left it out.
  const candidate = { ...rest, meta: { tag: [{ ...EXTERNAL_TAG }] }, ...(person.patient || !patientRef ? {} : { patient: { reference: patientRef } }) } as RelatedPerson;
  checkParameterResource(candidate, 'related-person');
  const stored = await c.repo.create(candidate, { owner: ownerOf(c.caller, candidate.resourceType) });
  return { reference: `RelatedPerson/${stored.id}` };
}

/** ISiK 6.0.0 $book: `QuestionnaireResponse.text` MUSS be filled so the receiver can show it. */
async function storeSubmittedInformation(c: BookingContext, qr: QuestionnaireResponse, patientRef: string | undefined): Promise<Reference> {
  const expression = "Parameters.parameter.where(name='patientSubmittedInformation').resource.text";
  if (!qr.text?.div) throw unprocessable('patientSubmittedInformation: QuestionnaireResponse.text must be filled', expression, 'required');
  const { id: _id, meta: _meta, ...rest } = qr;
  const candidate: QuestionnaireResponse = { ...rest, ...(qr.subject || !patientRef ? {} : { subject: { reference: patientRef } }) };
  checkParameterResource(candidate, 'patientSubmittedInformation');
  const stored = await c.repo.create(candidate, { owner: ownerOf(c.caller, candidate.resourceType) });
  return { reference: `QuestionnaireResponse/${stored.id}` };
}

function checkParameterResource(resource: RelatedPerson | QuestionnaireResponse, name: string): void {
  const result = validateResource(resource, { profiles: 'claimed' });
  if (!result.ok) throw new OperationOutcomeError(result.status, result.issues.map((i) => ({ ...i, diagnostics: `${name}: ${i.diagnostics ?? i.code}` })));
}
