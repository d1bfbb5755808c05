import crypto from 'node:crypto';
import type { Bundle, BundleEntry, CodeableConcept, Coding, Schedule, Slot } from '@medplum/fhirtypes';
import { OpeningHoursError, slotWindows, type OpeningHours, type SlotWindow } from '../../common/opening-hours';
import { Fhir, FhirError, outcome } from './fhir';
import { conceptLabel } from './labels';
import { calendarSummary } from './practice';
import { BOOKING_CONFIRMATION_URL, ISIK_PROFILE, SCHEDULE_NAME_URL } from '../../common/vocabulary';

/** One calendar made on the page holds at most this many slots (one transaction, under the 5 MB body limit). */
export const MAX_SLOTS = 5000;
/** The overlaps one check reports at most (enough to show; the calendar is refused at the first). */
const MAX_CONFLICTS = 50;

/** The "new calendar" form, as the page sends it. */
export interface CalendarForm {
  name: string;
  /** `Practitioner/{id}` or `HealthcareService/{id}`. */
  actor: string;
  actorDisplay?: string;
  /** Codings and text, or text alone (ISiKKalender: serviceType.text suffices). */
  serviceType: CodeableConcept;
  specialty: Coding;
  hours: OpeningHours;
  slotMinutes: number;
  from: string;
  to: string;
  manualConfirmation: boolean;
}

export interface Conflict {
  start: string;
  end: string;
  existingSlot: string;
  existingStart: string;
  existingEnd: string;
  calendar: string;
}

export interface CalendarPreview {
  slots: number;
  first: SlotWindow | null;
  last: SlotWindow | null;
  /** Slots per ISO weekday (1 = Monday). */
  perWeekday: Record<string, number>;
  conflicts: Conflict[];
}

/** A refusal of one field of the form: its OperationOutcome expression, and the field for the page to name. */
const badField = (field: string, message: string) => new FhirError(400, outcome('invalid', message, field), { code: 'form-field', field });

/** Reads and checks the form; every refusal names its field (OperationOutcome expression). */
export function parseForm(body: unknown): CalendarForm {
  const b = (body ?? {}) as Record<string, unknown>;
  const bad = badField;
  const text = (field: string, max = 200): string => {
    const v = b[field];
    if (typeof v !== 'string' || !v.trim() || v.length > max) throw bad(field, `${field}: required text of at most ${max} characters`);
    return v.trim();
  };
  const codingOf = (field: string, c: Coding | undefined): Coding => {
    if (!c || typeof c !== 'object' || typeof c.system !== 'string' || typeof c.code !== 'string' || !c.system || !c.code) throw bad(field, `${field}: choose a code`);
    return { system: c.system, code: c.code, ...(typeof c.display === 'string' ? { display: c.display } : {}) };
  };
  const coding = (field: string): Coding => codingOf(field, b[field] as Coding | undefined);
  // A CodeableConcept (codings and/or text), or a bare Coding.
  const concept = (field: string): CodeableConcept => {
    const v = b[field] as (CodeableConcept & Coding) | undefined;
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw bad(field, `${field}: choose one or enter it as text`);
    if (typeof v.system === 'string' || typeof v.code === 'string') return { coding: [codingOf(field, v)] };
    if (v.coding !== undefined && !Array.isArray(v.coding)) throw bad(field, `${field}.coding: a list of codes`);
    const codings = (v.coding ?? []).map((c) => codingOf(field, c));
    if (v.text !== undefined && typeof v.text !== 'string') throw bad(field, `${field}.text: text`);
    const text = v.text?.trim();
    if (text && text.length > 200) throw bad(field, `${field}.text: at most 200 characters`);
    if (!codings.length && !text) throw bad(field, `${field}: choose one or enter it as text`);
    return { ...(codings.length ? { coding: codings } : {}), ...(text ? { text } : {}) };
  };
  const actor = text('actor');
  if (!/^(Practitioner|HealthcareService)\/[A-Za-z0-9\-.]{1,64}$/.test(actor)) throw bad('actor', 'actor: a Practitioner or HealthcareService of this repository');
  const hours = b.hours;
  if (!hours || typeof hours !== 'object' || Array.isArray(hours)) throw bad('hours', 'hours: opening hours per weekday');
  for (const [day, ranges] of Object.entries(hours)) {
    if (!Array.isArray(ranges) || ranges.some((r) => !Array.isArray(r) || r.length !== 2 || r.some((x) => typeof x !== 'string'))) throw bad(`hours.${day}`, `hours.${day}: a list of [from, to] times`);
  }
  const slotMinutes = Number(b.slotMinutes);
  return {
    name: text('name'),
    actor,
    actorDisplay: typeof b.actorDisplay === 'string' ? b.actorDisplay.slice(0, 200) : undefined,
    serviceType: concept('serviceType'),
    specialty: coding('specialty'),
    hours: hours as OpeningHours,
    slotMinutes,
    from: text('from', 10),
    to: text('to', 10),
    manualConfirmation: b.manualConfirmation === true,
  };
}

/** The slot windows of a form, or a 400 naming the field that makes them impossible. */
export function windowsOf(form: CalendarForm, timeZone: string): SlotWindow[] {
  try {
    const windows = slotWindows({ hours: form.hours, slotMinutes: form.slotMinutes, from: form.from, to: form.to, timeZone }, MAX_SLOTS);
    if (windows.length === 0) throw new FhirError(400, outcome('invalid', 'these opening hours and dates give no slot', 'hours'), { code: 'no-slots' });
    return windows;
  } catch (err) {
    if (err instanceof OpeningHoursError) throw badField(err.field, err.message);
    throw err;
  }
}

/**
 * Existing slots of the same actor (any of its calendars) that overlap a planned window: a person
 * or a service is in one place at a time.
 */
export async function conflictsOf(fhir: Fhir, form: CalendarForm, windows: SlotWindow[]): Promise<Conflict[]> {
  const schedules = ((await fhir.search('Schedule', { actor: form.actor, _count: '500' }, 1000)) as Schedule[]).filter((s) => s.resourceType === 'Schedule');
  if (!schedules.length) return [];
  const names = new Map(schedules.map((s) => [`Schedule/${s.id}`, calendarSummary(s).name]));
  const first = windows[0].start.getTime();
  const last = windows[windows.length - 1].end.getTime();
  // A slot starting up to a day before the first window can still reach into it.
  const existing = ((await fhir.search('Slot', { schedule: [...names.keys()].join(','), start: [`ge${new Date(first - 86_400_000).toISOString()}`, `lt${new Date(last).toISOString()}`], _count: '1000' }, 50_000)) as Slot[])
    .filter((s) => s.resourceType === 'Slot' && s.status !== 'entered-in-error')
    .map((s) => ({ s, start: Date.parse(s.start), end: Date.parse(s.end) }))
    .sort((a, b) => a.start - b.start);
  const conflicts: Conflict[] = [];
  // Both lists sorted by start: a sweep, skipping existing slots that start too early to reach the window.
  const longest = existing.reduce((m, e) => Math.max(m, e.end - e.start), 0);
  let j = 0;
  for (const w of windows) {
    const ws = w.start.getTime();
    const we = w.end.getTime();
    while (j < existing.length && existing[j].start + longest <= ws) j++;
    for (let k = j; k < existing.length && existing[k].start < we; k++) {
      const e = existing[k];
      if (e.end > ws) conflicts.push({ start: w.start.toISOString(), end: w.end.toISOString(), existingSlot: `Slot/${e.s.id}`, existingStart: e.s.start, existingEnd: e.s.end, calendar: names.get(e.s.schedule.reference ?? '') ?? '' });
    }
    if (conflicts.length >= MAX_CONFLICTS) break;
  }
  return conflicts;
}

export async function previewCalendar(fhir: Fhir, form: CalendarForm, timeZone: string): Promise<CalendarPreview> {
  const windows = windowsOf(form, timeZone);
  const perWeekday: Record<string, number> = {};
  for (const w of windows) {
    const day = String(((new Date(`${w.date}T00:00:00Z`).getUTCDay() + 6) % 7) + 1);
    perWeekday[day] = (perWeekday[day] ?? 0) + 1;
  }
  return { slots: windows.length, first: windows[0], last: windows[windows.length - 1], perWeekday, conflicts: await conflictsOf(fhir, form, windows) };
}

/**
 * Writes the Schedule and all its Slots in one transaction Bundle (all or nothing); refuses with
 * 409 and writes nothing when a slot would overlap one the actor already has.
 */
export async function createCalendar(fhir: Fhir, form: CalendarForm, timeZone: string): Promise<{ schedule: string; slots: number }> {
  const windows = windowsOf(form, timeZone);
  const conflicts = await conflictsOf(fhir, form, windows);
  if (conflicts.length) {
    const c = conflicts[0];
    const more = conflicts.length - 1;
    const atLeast = conflicts.length >= MAX_CONFLICTS;
    throw new FhirError(
      409,
      outcome('conflict', `a new slot ${c.start}–${c.end} overlaps ${c.existingSlot} (${c.existingStart}–${c.existingEnd}) of calendar "${c.calendar}"${more ? ` (and ${more}${atLeast ? '+' : ''} more)` : ''}; nothing was written`, 'hours'),
      { code: 'calendar-overlap', start: c.start, end: c.end, existingStart: c.existingStart, existingEnd: c.existingEnd, calendar: c.calendar, more, atLeast },
    );
  }
  const scheduleUrl = `urn:uuid:${crypto.randomUUID()}`;
  const extension: Schedule['extension'] = [{ url: SCHEDULE_NAME_URL, valueString: form.name }];
  if (form.manualConfirmation) extension.push({ url: BOOKING_CONFIRMATION_URL, valueCode: 'manual' });
  const serviceType = [{ ...form.serviceType, text: conceptLabel(form.serviceType) ?? form.name }];
  const specialty = [{ coding: [form.specialty] }];
  const schedule: Schedule = {
    resourceType: 'Schedule',
    meta: { profile: [ISIK_PROFILE.Schedule] },
    extension,
    active: true,
    serviceType,
    specialty,
    actor: [{ reference: form.actor, ...(form.actorDisplay ? { display: form.actorDisplay } : {}) }],
    planningHorizon: { start: windows[0].start.toISOString(), end: windows[windows.length - 1].end.toISOString() },
  };
  const entry: BundleEntry[] = [
    { fullUrl: scheduleUrl, resource: schedule, request: { method: 'POST', url: 'Schedule' } },
    ...windows.map(
      (w): BundleEntry => ({
        fullUrl: `urn:uuid:${crypto.randomUUID()}`,
        resource: { resourceType: 'Slot', meta: { profile: [ISIK_PROFILE.Slot] }, serviceType, specialty, schedule: { reference: scheduleUrl }, status: 'free', start: w.start.toISOString(), end: w.end.toISOString() } satisfies Slot,
        request: { method: 'POST', url: 'Slot' },
      }),
    ),
  ];
  const result = await fhir.request<Bundle>('POST', '', { body: { resourceType: 'Bundle', type: 'transaction', entry } satisfies Bundle });
  const location = result.entry?.[0]?.response?.location ?? '';
  const id = /Schedule\/([^/]+)/.exec(location)?.[1] ?? (result.entry?.[0]?.resource?.id as string | undefined);
  if (!id) throw new FhirError(502, outcome('exception', 'the repository stored the calendar but did not say where'));
  return { schedule: id, slots: windows.length };
}
