import type { Appointment, Bundle, CodeableConcept, CodeSystem, Coding, HealthcareService, Parameters, Patient, Practitioner, Resource, Schedule, Slot, Subscription } from '@medplum/fhirtypes';
import { addCalendarDays, isoWeekday, wallDate, wallTimeToUtc } from '../../common/opening-hours';
import { BOOKING_CONFIRMATION_URL, LAST_DELIVERY_URL, SCHEDULE_NAME_URL } from '../../common/vocabulary';
import { Fhir, FhirError, outcome } from './fhir';
import { codingLabel, conceptLabel, germanDesignation } from './labels';

/**
 * What the practice page shows and does, as FHIR calls through the client's session: no new way
 * into the repository, only the owner's REST interactions composed into views.
 */

const CANCELLATION_SYSTEM = 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason';

/** ISiKTerminCancelationReason (ISiK Terminplanung 6.0.0): the reasons a decline or cancel may give. */
export const CANCELLATION_REASONS: readonly Coding[] = [
  { system: CANCELLATION_SYSTEM, code: 'pat', display: 'Patient' },
  { system: CANCELLATION_SYSTEM, code: 'prov', display: 'Provider' },
  { system: CANCELLATION_SYSTEM, code: 'maint', display: 'Equipment Maintenance/Repair' },
  { system: CANCELLATION_SYSTEM, code: 'meds-inc', display: 'Prep/Med Incomplete' },
  { system: CANCELLATION_SYSTEM, code: 'other', display: 'Other' },
];

export interface CalendarSummary {
  id: string;
  name: string;
  actor: string | null;
  actorReference: string | null;
  service: string | null;
  manualConfirmation: boolean;
  active: boolean;
}

export interface AppointmentSummary {
  id: string;
  version: string | null;
  status: Appointment['status'];
  start: string | null;
  end: string | null;
  patient: string | null;
  service: string | null;
  slotIds: string[];
  calendar: string | null;
  cancellationReason: string | null;
}

export type AppointmentAction = 'confirm' | 'decline' | 'cancel';
const DONE: Record<AppointmentAction, string> = { confirm: 'confirmed', decline: 'declined', cancel: 'cancelled' };

/** A participant of an appointment: its resource type and participation status stay codes, the page names them. */
export interface Participant {
  type: string | null;
  display: string;
  status: string;
}

export interface SlotView {
  id: string;
  status: Slot['status'];
  start: string;
  end: string;
  /** Day (YYYY-MM-DD) and wall-clock times in the page's time zone. */
  date: string;
  from: string;
  to: string;
  appointments: AppointmentSummary[];
}

export interface WeekView {
  calendar: CalendarSummary;
  timeZone: string;
  /** The day asked for, or (none asked for) the first day with a slot from today on, else today. */
  date: string;
  /** Monday of the week and the seven days. */
  start: string;
  days: string[];
  slots: SlotView[];
}

export class Practice {
  constructor(
    readonly fhir: Fhir,
    readonly timeZone: string,
  ) {}

  async calendars(): Promise<CalendarSummary[]> {
    const found = (await this.fhir.search('Schedule', { _count: '500' })) as Schedule[];
    return found.filter((s) => s.resourceType === 'Schedule').map(calendarSummary).sort((a, b) => a.name.localeCompare(b.name, 'de'));
  }

  /**
   * The week (Monday to Sunday, in the page's time zone) holding `date`, of one calendar; without
   * a date the week of the calendar's next slot (a first screen that opens on an empty week while
   * the slots start next Monday tells nothing).
   */
  async week(scheduleId: string, date?: string): Promise<WeekView> {
    const [schedule, shown] = await Promise.all([this.fhir.read<Schedule>('Schedule', scheduleId), date ?? this.nextSlotDay(scheduleId)]);
    date = shown;
    const monday = addCalendarDays(date, 1 - isoWeekday(date));
    const days = Array.from({ length: 7 }, (_, i) => addCalendarDays(monday, i));
    const from = wallTimeToUtc(monday, 0, this.timeZone).toISOString();
    const to = wallTimeToUtc(addCalendarDays(monday, 7), 0, this.timeZone).toISOString();
    const [slots, found] = await Promise.all([
      this.fhir.search('Slot', { schedule: `Schedule/${scheduleId}`, start: [`ge${from}`, `lt${to}`], _count: '1000' }, 5000) as Promise<Slot[]>,
      this.fhir.search('Appointment', { date: [`ge${from}`, `lt${to}`], _include: 'Appointment:patient', _count: '1000' }, 5000),
    ]);
    const patients = byReference(found.filter((r): r is Patient => r.resourceType === 'Patient'));
    const calendar = calendarSummary(schedule);
    const bySlot = new Map<string, AppointmentSummary[]>();
    for (const a of found.filter((r): r is Appointment => r.resourceType === 'Appointment')) {
      const summary = appointmentSummary(a, patients, calendar.name);
      for (const id of summary.slotIds) bySlot.set(id, [...(bySlot.get(id) ?? []), summary]);
    }
    const views = slots
      .filter((s) => s.resourceType === 'Slot')
      .map((s) => {
        const start = new Date(s.start);
        const end = new Date(s.end);
        const appointments = (bySlot.get(s.id as string) ?? []).sort((a, b) => rank(a.status) - rank(b.status));
        return { id: s.id as string, status: s.status, start: s.start, end: s.end, date: wallDate(start, this.timeZone), from: clock(start, this.timeZone), to: clock(end, this.timeZone), appointments };
      })
      .sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
    return { calendar, timeZone: this.timeZone, date, start: monday, days, slots: views };
  }

  /** The day (in the page's time zone) of the calendar's first slot from the start of today, else today. */
  private async nextSlotDay(scheduleId: string): Promise<string> {
    const today = wallDate(new Date(), this.timeZone);
    const from = wallTimeToUtc(today, 0, this.timeZone).toISOString();
    const [next] = (await this.fhir.search('Slot', { schedule: `Schedule/${scheduleId}`, start: `ge${from}`, _sort: 'start', _count: '1', _elements: 'start' }, 1)).filter((r): r is Slot => r.resourceType === 'Slot');
    return next?.start ? wallDate(new Date(next.start), this.timeZone) : today;
  }

  /** Every pending appointment, soonest first. */
  async pending(): Promise<AppointmentSummary[]> {
    const found = await this.fhir.search('Appointment', { status: 'pending', _include: ['Appointment:patient', 'Appointment:slot'], _count: '500' }, 2000);
    const patients = byReference(found.filter((r): r is Patient => r.resourceType === 'Patient'));
    const slots = byReference(found.filter((r): r is Slot => r.resourceType === 'Slot'));
    const names = new Map((await this.calendars()).map((c) => [`Schedule/${c.id}`, c.name]));
    return found
      .filter((r): r is Appointment => r.resourceType === 'Appointment' && r.status === 'pending')
      .map((a) => {
        const slot = slots.get(a.slot?.[0]?.reference ?? '');
        return appointmentSummary(a, patients, names.get(slot?.schedule?.reference ?? '') ?? null);
      })
      .sort((a, b) => Date.parse(a.start ?? '') - Date.parse(b.start ?? ''));
  }

  /** One appointment with its patient, slots and version history. */
  async appointment(id: string): Promise<{ appointment: AppointmentSummary; participants: Participant[]; slots: SlotView[]; history: { version: string; lastUpdated: string | null; status: string }[] }> {
    const a = await this.fhir.read<Appointment>('Appointment', id);
    const refs = (a.slot ?? []).map((s) => s.reference).filter((r): r is string => !!r?.startsWith('Slot/'));
    const [slotList, history, patients] = await Promise.all([
      Promise.all(refs.map((r) => this.fhir.read<Slot>('Slot', r.slice(5)).catch(() => undefined))),
      this.fhir.request<Bundle>('GET', `Appointment/${encodeURIComponent(id)}/_history?_count=100`),
      this.patientsOf(a),
    ]);
    const slots = slotList.filter((s): s is Slot => !!s);
    const schedule = slots[0]?.schedule?.reference?.startsWith('Schedule/') ? await this.fhir.read<Schedule>('Schedule', slots[0].schedule.reference.slice(9)).catch(() => undefined) : undefined;
    return {
      appointment: appointmentSummary(a, patients, schedule ? calendarSummary(schedule).name : null),
      participants: (a.participant ?? []).map((p) => {
        const ref = p.actor?.reference ?? '';
        return { type: /^[A-Z][A-Za-z]+(?=\/)/.exec(ref)?.[0] ?? null, display: personName(patients.get(ref)) ?? p.actor?.display ?? ref, status: p.status };
      }),
      slots: slots.map((s) => ({ id: s.id as string, status: s.status, start: s.start, end: s.end, date: wallDate(new Date(s.start), this.timeZone), from: clock(new Date(s.start), this.timeZone), to: clock(new Date(s.end), this.timeZone), appointments: [] })),
      history: (history.entry ?? [])
        .map((e) => e.resource as Appointment | undefined)
        .filter((r): r is Appointment => !!r)
        .map((r) => ({ version: r.meta?.versionId ?? '', lastUpdated: r.meta?.lastUpdated ?? null, status: r.status })),
    };
  }

  /** A pending appointment becomes `booked` (only owners confirm: docs/requirements.md#booking-book). */
  async confirm(id: string, version?: string): Promise<AppointmentSummary> {
    const current = await this.current(id, version, ['pending'], 'confirm');
    const patched = await this.patch(current, [{ type: 'replace', path: 'Appointment.status', value: { valueCode: 'booked' } }]);
    return appointmentSummary(patched, await this.patientsOf(patched), null);
  }

  /** A pending appointment declined, or a booked one cancelled: `cancelled` with an ISiK reason. */
  async cancel(id: string, reasonCode: unknown, o: { version?: string; only: Appointment['status'][]; action: 'decline' | 'cancel' }): Promise<AppointmentSummary> {
    const reason = CANCELLATION_REASONS.find((r) => r.code === reasonCode);
    if (!reason) throw new FhirError(400, outcome('required', `choose a cancellation reason (${CANCELLATION_REASONS.map((r) => r.code).join(', ')})`, 'Appointment.cancelationReason'), { code: 'reason-required' });
    const current = await this.current(id, o.version, o.only, o.action);
    const value = { valueCodeableConcept: { coding: [reason] } };
    const patched = await this.patch(current, [
      { type: 'replace', path: 'Appointment.status', value: { valueCode: 'cancelled' } },
      current.cancelationReason ? { type: 'replace', path: 'Appointment.cancelationReason', value } : { type: 'add', path: 'Appointment', name: 'cancelationReason', value },
    ]);
    return appointmentSummary(patched, await this.patientsOf(patched), null);
  }

  /** Every subscription the owner sees with its `$status`: events, last delivery, last error. */
  async subscriptions(): Promise<
    { id: string; topic: string; endpoint: string | null; headers: string[]; status: string; eventsSinceStart: number | null; lastDelivery: string | null; lastError: string | null; errorCode: string | null; reason: string | null }[]
  > {
    const subs = ((await this.fhir.search('Subscription', { _count: '500' }, 2000)) as Subscription[]).filter((s) => s.resourceType === 'Subscription');
    const statuses = new Map<string, Parameters>();
    if (subs.length) {
      const bundle = await this.fhir.request<Bundle>('GET', 'Subscription/$status');
      for (const e of bundle.entry ?? []) {
        const p = e.resource as Parameters | undefined;
        const ref = p?.parameter?.find((x) => x.name === 'subscription')?.valueReference?.reference ?? '';
        const id = ref.split('/').pop();
        if (id && p) statuses.set(id, p);
      }
    }
    return subs.map((s) => {
      const p = statuses.get(s.id as string);
      const param = (name: string) => p?.parameter?.find((x) => x.name === name);
      const events = param('events-since-subscription-start')?.valueString;
      return {
        id: s.id as string,
        topic: s.criteria,
        endpoint: s.channel?.endpoint ?? null,
        headers: (s.channel?.header ?? []).map(maskHeader),
        status: param('status')?.valueCode ?? s.status,
        eventsSinceStart: events === undefined ? null : Number(events),
        lastDelivery: param('status')?.extension?.find((x) => x.url === LAST_DELIVERY_URL)?.valueInstant ?? null,
        lastError: s.error ?? null,
        errorCode: param('error')?.valueCodeableConcept?.coding?.[0]?.code ?? null,
        reason: s.reason ?? null,
      };
    });
  }

  /**
   * Who a calendar can belong to, and what it can offer: the service types the repository's
   * calendars (Schedule.serviceType) and services (HealthcareService.type) use, and the concepts of
   * its CodeSystems for them; the specialties likewise. ISiK binds no value set to
   * Schedule.serviceType ("Freitextbeschreibung ist ausreichend"): the page offers free text too.
   */
  async options(): Promise<{ actors: { reference: string; display: string; type: string }[]; serviceTypes: ServiceTypeOption[]; specialties: SpecialtyOption[]; cancellationReasons: readonly Coding[] }> {
    const [practitioners, services, codeSystems, schedules] = await Promise.all([
      this.fhir.search('Practitioner', { _count: '500' }, 1000) as Promise<Practitioner[]>,
      this.fhir.search('HealthcareService', { _count: '500' }, 1000) as Promise<HealthcareService[]>,
      this.fhir.search('CodeSystem', { _count: '200' }, 500) as Promise<CodeSystem[]>,
      this.fhir.search('Schedule', { _count: '500' }, 1000) as Promise<Schedule[]>,
    ]);
    const ofType = <T extends Resource>(list: Resource[], type: T['resourceType']) => list.filter((r): r is T => r.resourceType === type);
    const actors = [
      ...ofType<Practitioner>(practitioners, 'Practitioner').filter((p) => p.active !== false).map((p) => ({ reference: `Practitioner/${p.id}`, display: personName(p) ?? `Practitioner/${p.id}`, type: 'Practitioner' })),
      ...ofType<HealthcareService>(services, 'HealthcareService').filter((h) => h.active !== false).map((h) => ({ reference: `HealthcareService/${h.id}`, display: h.name ?? `HealthcareService/${h.id}`, type: 'HealthcareService' })),
    ];
    const serviceTypes = new ConceptSet();
    const specialties = new CodingSet();
    // Calendars first: their service type is the element a new calendar fills.
    for (const r of ofType<Schedule>(schedules, 'Schedule')) for (const cc of r.serviceType ?? []) serviceTypes.addUsed(cc);
    for (const r of ofType<HealthcareService>(services, 'HealthcareService')) for (const cc of r.type ?? []) serviceTypes.addUsed(cc);
    for (const cs of ofType<CodeSystem>(codeSystems, 'CodeSystem').filter((c) => c.url)) {
      const specialty = /fachrichtung|specialt/i.test(cs.url as string);
      if (!specialty && !usedFor(cs, ['Schedule', 'HealthcareService'])) continue;
      for (const c of cs.concept ?? []) {
        const coding = { system: cs.url, code: c.code, display: c.display ?? c.code };
        const german = germanDesignation(c);
        if (specialty) specialties.add(coding, german);
        else serviceTypes.addCoding(coding, german);
      }
    }
    // Specialties the repository's calendars and services already use (their code system is often not stored).
    for (const r of [...ofType<Schedule>(schedules, 'Schedule'), ...ofType<HealthcareService>(services, 'HealthcareService')]) for (const cc of r.specialty ?? []) for (const c of cc.coding ?? []) specialties.add(c);
    return { actors, serviceTypes: serviceTypes.list(), specialties: specialties.list(), cancellationReasons: CANCELLATION_REASONS };
  }

  /** The newest change time of Appointments and Slots (what the page's live update watches). */
  async lastChange(): Promise<string | null> {
    const newest = await Promise.all(
      ['Appointment', 'Slot'].map(async (type) => {
        const b = await this.fhir.request<Bundle>('GET', `${type}?_sort=-_lastUpdated&_count=1&_elements=id`);
        return b.entry?.[0]?.resource?.meta?.lastUpdated ?? null;
      }),
    );
    return newest.filter((x): x is string => !!x).sort().pop() ?? null;
  }

  private async current(id: string, version: string | undefined, only: Appointment['status'][], action: AppointmentAction): Promise<Appointment> {
    const a = await this.fhir.read<Appointment>('Appointment', id);
    if (version && a.meta?.versionId !== version) {
      throw new FhirError(409, outcome('conflict', `Appointment/${id} changed since the page showed it (now version ${a.meta?.versionId}, ${a.status}); reload and try again`), { code: 'appointment-changed', status: a.status });
    }
    if (!only.includes(a.status)) throw new FhirError(409, outcome('business-rule', `Appointment/${id} is ${a.status}: only ${only.join(' or ')} appointments can be ${DONE[action]}`, 'Appointment.status'), { code: 'appointment-status', status: a.status, action });
    return a;
  }

  private patch(a: Appointment, operations: { type: string; path: string; name?: string; value: Record<string, unknown> }[]): Promise<Appointment> {
    const body: Parameters = {
      resourceType: 'Parameters',
      parameter: operations.map((op) => ({
        name: 'operation',
        part: [
          { name: 'type', valueCode: op.type },
          { name: 'path', valueString: op.path },
          ...(op.name ? [{ name: 'name', valueString: op.name }] : []),
          { name: 'value', ...op.value },
        ],
      })),
    };
    // If-Match: a change by someone else in between answers 412 instead of being overwritten.
    return this.fhir.request<Appointment>('PATCH', `Appointment/${encodeURIComponent(a.id as string)}`, { body, ifMatch: `W/"${a.meta?.versionId}"` });
  }

  private async patientsOf(a: Appointment): Promise<Map<string, Patient>> {
    const refs = (a.participant ?? []).map((p) => p.actor?.reference).filter((r): r is string => !!r?.startsWith('Patient/'));
    const found = await Promise.all(refs.map((r) => this.fhir.read<Patient>('Patient', r.slice(8)).catch(() => undefined)));
    return byReference(found.filter((p): p is Patient => !!p));
  }
}

export function calendarSummary(s: Schedule): CalendarSummary {
  const actor = s.actor?.[0];
  const service = s.serviceType?.[0];
  const name = s.extension?.find((e) => e.url === SCHEDULE_NAME_URL)?.valueString ?? [conceptLabel(service), actor?.display].filter(Boolean).join(' · ');
  return {
    id: s.id as string,
    name: name || `Schedule/${s.id}`,
    actor: actor?.display ?? actor?.reference ?? null,
    actorReference: actor?.reference ?? null,
    service: conceptLabel(service),
    manualConfirmation: s.extension?.some((e) => e.url === BOOKING_CONFIRMATION_URL && e.valueCode === 'manual') ?? false,
    active: s.active !== false,
  };
}

function appointmentSummary(a: Appointment, patients: Map<string, Patient>, calendar: string | null): AppointmentSummary {
  const patientRef = a.participant?.find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor;
  return {
    id: a.id as string,
    version: a.meta?.versionId ?? null,
    status: a.status,
    start: a.start ?? null,
    end: a.end ?? null,
    patient: personName(patients.get(patientRef?.reference ?? '')) ?? patientRef?.display ?? null,
    service: conceptLabel(a.serviceType?.[0]),
    slotIds: (a.slot ?? []).map((s) => s.reference).filter((r): r is string => !!r?.startsWith('Slot/')).map((r) => r.slice(5)),
    calendar,
    cancellationReason: a.cancelationReason?.coding?.[0]?.code ?? a.cancelationReason?.text ?? null,
  };
}

/** Booked first, then pending, then the rest (cancelled last). */
const rank = (s: Appointment['status']) => ['booked', 'arrived', 'checked-in', 'fulfilled', 'pending', 'proposed', 'waitlist', 'noshow', 'cancelled', 'entered-in-error'].indexOf(s);

function byReference<T extends Resource>(list: T[]): Map<string, T> {
  return new Map(list.map((r) => [`${r.resourceType}/${r.id}`, r]));
}

function personName(p: Patient | Practitioner | undefined): string | null {
  const n = p?.name?.find((x) => x.use === 'official') ?? p?.name?.[0];
  if (!n) return null;
  return n.text ?? ([...(n.prefix ?? []), ...(n.given ?? []), n.family].filter(Boolean).join(' ') || null);
}

function clock(t: Date, timeZone: string): string {
  return new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(t);
}

/** A header's name stays readable; its value (often a credential) does not. */
export function maskHeader(h: string): string {
  const i = h.indexOf(':');
  return i < 0 ? '••••' : `${h.slice(0, i)}: ••••`;
}

function usedFor(cs: CodeSystem, types: string[]): boolean {
  return (cs.useContext ?? []).some((u) => u.valueCodeableConcept?.coding?.some((c) => types.includes(c.code as string)));
}

/** A service type the page offers: the concept a new calendar takes, and its name. */
export interface ServiceTypeOption {
  label: string;
  concept: CodeableConcept;
}

export interface SpecialtyOption {
  label: string;
  coding: Coding;
}

const codingKey = (c: Coding) => `${c.system}|${c.code}`;
const complete = (c: Coding): c is Coding & { system: string; code: string } => typeof c.system === 'string' && !!c.system && typeof c.code === 'string' && !!c.code;

/** Service types, each once: a concept in use keeps its codings and text; a code system's concept not in use is offered alone. */
class ConceptSet {
  private readonly concepts = new Map<string, ServiceTypeOption>();
  private readonly codings = new Set<string>();

  addUsed(cc: CodeableConcept): void {
    const coding = (cc.coding ?? []).filter(complete).map((c) => ({ system: c.system, code: c.code, ...(c.display ? { display: c.display } : {}) }));
    const text = cc.text?.trim();
    const label = conceptLabel({ coding, text });
    if (!label) return;
    const id = coding.length ? coding.map(codingKey).sort().join(' ') : `text:${label.toLocaleLowerCase('de')}`;
    if (this.concepts.has(id)) return;
    this.concepts.set(id, { label, concept: { ...(coding.length ? { coding } : {}), text: label } });
    for (const c of coding) this.codings.add(codingKey(c));
  }

  addCoding(c: Coding, german?: string): void {
    if (!complete(c) || this.codings.has(codingKey(c))) return;
    this.codings.add(codingKey(c));
    const label = german ?? (codingLabel(c) as string);
    this.concepts.set(codingKey(c), { label, concept: { coding: [c], text: label } });
  }

  list(): ServiceTypeOption[] {
    return [...this.concepts.values()].sort((a, b) => a.label.localeCompare(b.label, 'de'));
  }
}

class CodingSet {
  private readonly map = new Map<string, SpecialtyOption>();
  add(c: Coding, german?: string): void {
    if (!complete(c) || this.map.has(codingKey(c))) return;
    const coding = { system: c.system, code: c.code, display: c.display ?? c.code };
    this.map.set(codingKey(c), { label: german ?? (codingLabel(coding) as string), coding });
  }
  list(): SpecialtyOption[] {
    return [...this.map.values()].sort((a, b) => a.label.localeCompare(b.label, 'de'));
  }
}
