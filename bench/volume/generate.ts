import type { Appointment, HealthcareService, Patient, Practitioner, Resource, Schedule, Slot } from '@medplum/fhirtypes';
import type { Repository } from '../../src/store/repository';
import { SEARCH_TABLES, withIndexesBuiltAfter } from '../../src/store/deferred-indexes';
// The fuzzer's seeded PRNG: the same spec makes the same data.
import { prng } from '../../test/fuzz/cases';

/**
 * A volume of realistic calendar data for the scale benchmarks: practitioners with their calendars
 * (a Schedule each, for one of a handful of services), weekday opening hours with a lunch break
 * (some calendars closed on Wednesday afternoon, some open on Saturday morning), German public
 * holidays closed, 15-minute slots day by day from `start` until `slots` are made; a share of them
 * booked (busy, with a booked Appointment of one of `patients` Patients), a share of those
 * bookings cancelled (the slot free again, the Appointment cancelled). Deterministic for a seed.
 */
export interface VolumeSpec {
  slots: number;
  calendars: number;
  patients: number;
  /** Share of slots booked (0..1). */
  fillRate: number;
  /** Share of bookings cancelled (0..1). */
  cancelRate: number;
  /** The first day (UTC midnight). */
  start: Date;
  slotMinutes: number;
  seed: number;
}

export const DEFAULT_VOLUME: Omit<VolumeSpec, 'slots'> = {
  calendars: 500,
  patients: 300_000,
  fillRate: 0.35,
  cancelRate: 0.08,
  start: new Date(Date.UTC(2027, 0, 4)),
  slotMinutes: 15,
  seed: 20261128,
};

export interface VolumeReport {
  slots: number;
  appointments: number;
  patients: number;
  calendars: number;
  firstDay: string;
  lastDay: string;
  seconds: number;
}

const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';
const SERVICES = [
  { code: '124', display: 'General Practice', specialty: { code: 'ALLG', display: 'Allgemeinmedizin' } },
  { code: '177', display: 'Neurology', specialty: { code: 'NEUR', display: 'Neurologie' } },
  { code: '165', display: 'Cardiology', specialty: { code: 'INNE', display: 'Innere Medizin' } },
  { code: '57', display: 'Immunization', specialty: { code: 'ALLG', display: 'Allgemeinmedizin' } },
  { code: '221', display: 'Surgery - General', specialty: { code: 'CHIR', display: 'Chirurgie' } },
];
const SERVICE_TYPE_SYSTEM = 'http://terminology.hl7.org/CodeSystem/service-type';
const SPECIALTY_SYSTEM = 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen';
const MINUTE = 60_000;
const DAY = 86_400_000;

/** Easter Sunday (Gregorian, the anonymous algorithm in Meeus, Astronomical Algorithms ch. 8). */
function easter(year: number): number {
  const a = year % 19;
  const b = Math.floor(year / 100);
  const c = year % 100;
  const d = Math.floor(b / 4);
  const e = b % 4;
  const f = Math.floor((b + 8) / 25);
  const g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30;
  const i = Math.floor(c / 4);
  const k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7;
  const m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31);
  const day = ((h + l - 7 * m + 114) % 31) + 1;
  return Date.UTC(year, month - 1, day);
}

/** The nationwide German public holidays of a year, as UTC midnights. */
function holidays(year: number): Set<number> {
  const e = easter(year);
  return new Set([Date.UTC(year, 0, 1), e - 2 * DAY, e + DAY, Date.UTC(year, 4, 1), e + 39 * DAY, e + 50 * DAY, Date.UTC(year, 9, 3), Date.UTC(year, 11, 25), Date.UTC(year, 11, 26)]);
}

/** Opening hours of calendar `n` on a weekday (0 Sunday), as [from, to) minutes after midnight, local time taken as UTC+1. */
function openingHours(n: number, weekday: number): [number, number][] {
  if (weekday === 0) return [];
  if (weekday === 6) return n % 5 === 1 ? [[9 * 60, 12 * 60]] : [];
  const morning: [number, number] = [8 * 60, 12 * 60];
  const afternoon: [number, number] = [13 * 60, 17 * 60];
  return weekday === 3 && n % 4 === 0 ? [morning] : [morning, afternoon];
}

interface Calendar {
  n: number;
  service: (typeof SERVICES)[number];
  schedule: string;
  practitioner: string;
}

/** Resources in the order they are written: calendars and patients first, then slots and appointments day by day. */
export function* volumeResources(spec: VolumeSpec): Generator<Resource[], VolumeReport> {
  const random = prng(spec.seed);
  const calendars: Calendar[] = Array.from({ length: spec.calendars }, (_, n) => ({ n, service: SERVICES[n % SERVICES.length], schedule: `vol-schedule-${n}`, practitioner: `vol-practitioner-${n}` }));
  yield SERVICES.map((s) => ({ resourceType: 'HealthcareService', id: `vol-service-${s.code}`, active: true, name: s.display, type: [{ coding: [{ system: SERVICE_TYPE_SYSTEM, code: s.code, display: s.display }] }] }) as HealthcareService);
  for (let i = 0; i < calendars.length; i += 1000) {
    yield calendars.slice(i, i + 1000).flatMap((c) => [practitioner(c), schedule(c)]);
  }
  for (let i = 0; i < spec.patients; i += 1000) {
    yield Array.from({ length: Math.min(1000, spec.patients - i) }, (_, j) => patient(i + j));
  }
  let made = 0;
  let appointments = 0;
  let day = spec.start.getTime();
  const closed = new Map<number, Set<number>>();
  while (made < spec.slots) {
    const year = new Date(day).getUTCFullYear();
    if (!closed.has(year)) closed.set(year, holidays(year));
    if (!closed.get(year)!.has(day)) {
      const chunk: Resource[] = [];
      for (const c of calendars) {
        for (const [from, to] of openingHours(c.n, new Date(day).getUTCDay())) {
          for (let m = from; m + spec.slotMinutes <= to && made < spec.slots; m += spec.slotMinutes) {
            // Local time as UTC+1: the opening hours' 08:00 is 07:00Z.
            const start = new Date(day + (m - 60) * MINUTE);
            const end = new Date(start.getTime() + spec.slotMinutes * MINUTE);
            const id = `vol-slot-${made}`;
            made++;
            const booked = random() < spec.fillRate;
            const cancelled = booked && random() < spec.cancelRate;
            chunk.push(slot(c, id, start, end, booked && !cancelled ? 'busy' : 'free'));
            if (booked) {
              chunk.push(appointment(c, `vol-appointment-${appointments}`, id, start, end, `vol-patient-${Math.floor(random() * spec.patients)}`, cancelled ? 'cancelled' : 'booked'));
              appointments++;
            }
          }
        }
        if (chunk.length >= 2000) yield chunk.splice(0);
      }
      if (chunk.length > 0) yield chunk;
    }
    day += DAY;
  }
  return {
    slots: made,
    appointments,
    patients: spec.patients,
    calendars: spec.calendars,
    firstDay: spec.start.toISOString().slice(0, 10),
    lastDay: new Date(day - DAY).toISOString().slice(0, 10),
    seconds: 0,
  };
}

/**
 * Writes the volume with `Repository.bulkLoad` (multi-row statements, index rows in one statement
 * per chunk), `parallel` chunks at a time on their own connections, and the booking holds of the
 * booked appointments (what `$book` would have written beside them). `progress` hears the slots
 * written so far.
 */
export async function loadVolume(
  repo: Repository,
  spec: VolumeSpec,
  o: { parallel?: number; progress?: (slots: number) => void; statementRows?: number; indexesAfter?: boolean } = {},
): Promise<VolumeReport> {
  if (o.indexesAfter) {
    // The time reported includes building the indexes again.
    const t0 = performance.now();
    const report = await withIndexesBuiltAfter(repo.db, [...SEARCH_TABLES, 'booking_slot', 'booking_slot_hold'], () => loadVolume(repo, spec, { ...o, indexesAfter: false }), { parallel: o.parallel ?? 2 });
    return { ...report, seconds: (performance.now() - t0) / 1000 };
  }
  const t0 = performance.now();
  const parallel = o.parallel ?? 2;
  const gen = volumeResources(spec);
  const inFlight = new Set<Promise<void>>();
  let slots = 0;
  let report: VolumeReport | undefined;
  for (;;) {
    const next = gen.next();
    if (next.done) {
      report = next.value;
      break;
    }
    const chunk = next.value;
    const write = (async () => {
      // A chunk in one statement by default (the fastest load); `statementRows` bounds a statement for a busy machine.
      await repo.bulkLoad(chunk, o.statementRows ?? chunk.length);
      await holdsOf(repo, chunk.filter((r): r is Appointment => r.resourceType === 'Appointment' && r.status === 'booked'));
      slots += chunk.filter((r) => r.resourceType === 'Slot').length;
      o.progress?.(slots);
    })();
    inFlight.add(write);
    void write.finally(() => inFlight.delete(write));
    if (inFlight.size >= parallel) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return { ...report, seconds: (performance.now() - t0) / 1000 };
}

/** booking_slot_hold and booking_reservation rows of booked appointments (migrations/200_booking.sql). */
async function holdsOf(repo: Repository, booked: Appointment[]): Promise<void> {
  if (booked.length === 0) return;
  const db = repo.db;
  const ids = booked.map((a) => a.id!);
  const slots = booked.map((a) => a.slot![0].reference!.slice('Slot/'.length));
  // Calendar n's practitioner and schedule share their number.
  const schedules = booked.map((a) => a.participant!.find((p) => p.actor?.reference?.startsWith('Practitioner/'))!.actor!.reference!.replace('Practitioner/vol-practitioner-', 'vol-schedule-'));
  const starts = booked.map((a) => a.start!);
  const ends = booked.map((a) => a.end!);
  await db.query('INSERT INTO booking_slot_hold (slot_id, appointment_id) SELECT * FROM unnest($1::text[], $2::text[])', [slots, ids]);
  await db.query("INSERT INTO booking_reservation (appointment_id, schedule_id, during) SELECT a, s, tstzrange(b, e, '[)') FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS t(a, s, b, e)", [ids, schedules, starts, ends]);
}

function practitioner(c: Calendar): Practitioner {
  return { resourceType: 'Practitioner', id: c.practitioner, active: true, name: [{ family: `Ärztin ${c.n}`, prefix: ['Dr. med.'] }] };
}

function schedule(c: Calendar): Schedule {
  return {
    resourceType: 'Schedule',
    id: c.schedule,
    meta: { profile: [`${ISIK}ISiKKalender`] },
    active: true,
    serviceType: [{ coding: [{ system: SERVICE_TYPE_SYSTEM, code: c.service.code, display: c.service.display }] }],
    specialty: [{ coding: [{ system: SPECIALTY_SYSTEM, code: c.service.specialty.code, display: c.service.specialty.display }] }],
    actor: [{ reference: `Practitioner/${c.practitioner}` }, { reference: `HealthcareService/vol-service-${c.service.code}` }],
  };
}

function slot(c: Calendar, id: string, start: Date, end: Date, status: 'free' | 'busy'): Slot {
  return {
    resourceType: 'Slot',
    id,
    meta: { profile: [`${ISIK}ISiKTerminblock`] },
    serviceType: [{ coding: [{ system: SERVICE_TYPE_SYSTEM, code: c.service.code }] }],
    specialty: [{ coding: [{ system: SPECIALTY_SYSTEM, code: c.service.specialty.code }] }],
    schedule: { reference: `Schedule/${c.schedule}` },
    status,
    start: start.toISOString(),
    end: end.toISOString(),
  };
}

function patient(n: number): Patient {
  return {
    resourceType: 'Patient',
    id: `vol-patient-${n}`,
    identifier: [{ type: { coding: [{ system: 'http://fhir.de/CodeSystem/identifier-type-de-basis', code: 'KVZ10' }] }, system: 'http://fhir.de/sid/gkv/kvid-10', value: `A${String(100000000 + n).slice(-9)}` }],
    name: [{ use: 'official', family: `Muster${n % 997}`, given: [['Erika', 'Max', 'Zoë', 'Jürgen'][n % 4]] }],
    gender: n % 2 ? 'female' : 'male',
    birthDate: `${1940 + (n % 80)}-${String((n % 12) + 1).padStart(2, '0')}-${String((n % 28) + 1).padStart(2, '0')}`,
  };
}

function appointment(c: Calendar, id: string, slotId: string, start: Date, end: Date, patientId: string, status: 'booked' | 'cancelled'): Appointment {
  return {
    resourceType: 'Appointment',
    id,
    meta: { profile: [`${ISIK}ISiKTermin`] },
    status,
    ...(status === 'cancelled' ? { cancelationReason: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason', code: 'pat' }] } } : {}),
    serviceType: [{ coding: [{ system: SERVICE_TYPE_SYSTEM, code: c.service.code }] }],
    specialty: [{ coding: [{ system: SPECIALTY_SYSTEM, code: c.service.specialty.code }] }],
    start: start.toISOString(),
    end: end.toISOString(),
    slot: [{ reference: `Slot/${slotId}` }],
    participant: [
      { actor: { reference: `Patient/${patientId}` }, status: 'accepted' },
      { actor: { reference: `Practitioner/${c.practitioner}` }, status: 'accepted' },
    ],
  };
}
