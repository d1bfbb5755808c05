import type {
  CodeableConcept,
  CodeSystem,
  HealthcareService,
  Location,
  Practitioner,
  PractitionerRole,
  Resource,
  Schedule,
  Slot,
} from '@medplum/fhirtypes';
import { BOOKING_CONFIRMATION_URL, ISIK_PROFILE, SCHEDULE_NAME_URL, SERVICE_TYPE_SYSTEM } from '../common/vocabulary';
import { addCalendarDays, slotWindows, wallDate, type OpeningHours } from '../common/opening-hours';

/**
 * The demo practice loaded into an empty embedded store (`npm start` serves
 * "demo calendars"): a group practice with a general-medicine and a neurology consultation
 * (two HealthcareServices), three doctors with one calendar each, free slots for the next 30 days
 * within opening hours, and the code systems that code the offered services. Everything is a
 * pure function of `now`, with stable ids, so a restart on the same day yields the same data.
 */
export function demoResources(now: Date): Resource[] {
  const location = practiceLocation();
  const resources: Resource[] = [...serviceCodeSystems(), location];
  for (const service of SERVICES) resources.push(healthcareService(service));
  for (const doctor of DOCTORS) {
    const service = SERVICES.find((s) => s.key === doctor.service) as ServiceSpec;
    resources.push(practitioner(doctor), practitionerRole(doctor, service), schedule(doctor, service, now));
    resources.push(...freeSlots(doctor, service, now));
  }
  return resources;
}

/** Demo slots cover this many days from `now`. */
export const DEMO_HORIZON_DAYS = 30;

/** Opening hours are wall-clock times of the practice. */
const PRACTICE_TIME_ZONE = 'Europe/Berlin';

const PRACTICE_SERVICES = 'http://terminus.local/fhir/CodeSystem/praxis-leistungen';
const FACHRICHTUNGEN = 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen';

interface ServiceSpec {
  key: string;
  name: string;
  serviceType: { code: string; display: string };
  practiceCode: { code: string; display: string };
  specialty: { code: string; display: string };
}

const SERVICES: readonly ServiceSpec[] = [
  {
    key: 'allgemeinmedizin',
    name: 'Hausärztliche Sprechstunde',
    serviceType: { code: '124', display: 'General Practice' },
    practiceCode: { code: 'hausarzt-sprechstunde', display: 'Hausärztliche Sprechstunde' },
    specialty: { code: 'ALLG', display: 'Allgemeinmedizin' },
  },
  {
    key: 'neurologie',
    name: 'Neurologische Sprechstunde',
    serviceType: { code: '177', display: 'Neurology' },
    practiceCode: { code: 'neuro-sprechstunde', display: 'Neurologische Sprechstunde' },
    specialty: { code: 'NEUR', display: 'Neurologie' },
  },
];


interface DoctorSpec {
  key: string;
  family: string;
  given: string;
  prefix: string;
  gender: 'female' | 'male';
  lanr: string;
  service: string;
  slotMinutes: 15 | 30;
  hours: OpeningHours;
  manualConfirmation: boolean;
}

const MORNING: Array<[string, string]> = [['08:00', '12:00']];

const DOCTORS: readonly DoctorSpec[] = [
  {
    key: 'weber',
    family: 'Weber',
    given: 'Anna',
    prefix: 'Dr. med.',
    gender: 'female',
    lanr: '123456601',
    service: 'allgemeinmedizin',
    slotMinutes: 15,
    // Wednesday and Friday afternoons closed, as in most German GP practices.
    hours: {
      1: [...MORNING, ['14:00', '18:00']],
      2: [...MORNING, ['14:00', '18:00']],
      3: MORNING,
      4: [...MORNING, ['14:00', '18:00']],
      5: MORNING,
    },
    manualConfirmation: false,
  },
  {
    key: 'yilmaz',
    family: 'Yılmaz',
    given: 'Mehmet',
    prefix: 'Dr. med.',
    gender: 'male',
    lanr: '234567601',
    service: 'allgemeinmedizin',
    slotMinutes: 15,
    // Late consultation on Tuesday and Thursday for working patients.
    hours: {
      1: MORNING,
      2: [...MORNING, ['15:00', '19:00']],
      3: MORNING,
      4: [...MORNING, ['15:00', '19:00']],
      5: MORNING,
    },
    manualConfirmation: false,
  },
  {
    key: 'schneider',
    family: 'Schneider',
    given: 'Jonas',
    prefix: 'Dr. med.',
    gender: 'male',
    lanr: '345678642',
    service: 'neurologie',
    slotMinutes: 30,
    hours: {
      1: [['09:00', '13:00'], ['14:00', '16:00']],
      2: [['09:00', '13:00'], ['14:00', '16:00']],
      3: [['09:00', '13:00']],
      4: [['09:00', '13:00'], ['14:00', '16:00']],
    },
    // Neurology appointments are triaged by the doctor first: bookings stay pending (202).
    manualConfirmation: true,
  },
];

function serviceType(s: ServiceSpec): CodeableConcept {
  return {
    text: s.name,
    coding: [
      { system: SERVICE_TYPE_SYSTEM, code: s.serviceType.code, display: s.serviceType.display },
      { system: PRACTICE_SERVICES, code: s.practiceCode.code, display: s.practiceCode.display },
    ],
  };
}

function specialty(s: ServiceSpec): CodeableConcept {
  return { coding: [{ system: FACHRICHTUNGEN, code: s.specialty.code, display: s.specialty.display }] };
}

function doctorName(d: DoctorSpec): string {
  return `${d.prefix} ${d.given} ${d.family}`;
}

/**
 * Every code system that codes the offered services is a CodeSystem of this repository, so a
 * client can show its codes: found by `context-type-value=
 * https://gematik.de/fhir/isik/CodeSystem/ContextType|ResourceUsage$
 * http://hl7.org/fhir/resource-types|HealthcareService` (and `|Schedule`).
 */
function serviceCodeSystems(): CodeSystem[] {
  const useContext = ['HealthcareService', 'Schedule'].map((type) => ({
    code: { system: 'https://gematik.de/fhir/isik/CodeSystem/ContextType', code: 'ResourceUsage' },
    valueCodeableConcept: { coding: [{ system: 'http://hl7.org/fhir/resource-types', code: type }] },
  }));
  return [
    {
      resourceType: 'CodeSystem',
      id: 'demo-codesystem-service-type',
      url: SERVICE_TYPE_SYSTEM,
      name: 'ServiceType',
      title: 'Service type (the codes this practice uses)',
      status: 'active',
      content: 'fragment',
      useContext,
      concept: SERVICES.map((s) => ({ code: s.serviceType.code, display: s.serviceType.display })),
    },
    {
      resourceType: 'CodeSystem',
      id: 'demo-codesystem-praxis-leistungen',
      url: PRACTICE_SERVICES,
      version: '1.0.0',
      name: 'PraxisLeistungen',
      title: 'Leistungen der Gemeinschaftspraxis am Stadtpark',
      status: 'active',
      content: 'complete',
      useContext,
      concept: SERVICES.map((s) => ({ code: s.practiceCode.code, display: s.practiceCode.display })),
    },
  ];
}

function practiceLocation(): Location {
  return {
    resourceType: 'Location',
    id: 'demo-location-praxis',
    status: 'active',
    name: 'Gemeinschaftspraxis am Stadtpark',
    telecom: [{ system: 'phone', value: '+49 30 1234567', use: 'work' }],
    address: { type: 'both', line: ['Parkstraße 12'], city: 'Berlin', postalCode: '10115', country: 'DE' },
  };
}

function healthcareService(s: ServiceSpec): HealthcareService {
  return {
    resourceType: 'HealthcareService',
    id: `demo-hcs-${s.key}`,
    meta: { profile: [ISIK_PROFILE.HealthcareService] },
    active: true,
    type: [serviceType(s)],
    specialty: [specialty(s)],
    name: s.name,
    location: [{ reference: 'Location/demo-location-praxis', display: 'Gemeinschaftspraxis am Stadtpark' }],
  };
}

function practitioner(d: DoctorSpec): Practitioner {
  return {
    resourceType: 'Practitioner',
    id: `demo-practitioner-${d.key}`,
    identifier: [
      {
        type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0203', code: 'LANR' }] },
        system: 'https://fhir.kbv.de/NamingSystem/KBV_NS_Base_ANR',
        value: d.lanr,
      },
    ],
    active: true,
    name: [{ use: 'official', family: d.family, given: [d.given], prefix: [d.prefix] }],
    gender: d.gender,
  };
}

function practitionerRole(d: DoctorSpec, s: ServiceSpec): PractitionerRole {
  return {
    resourceType: 'PractitionerRole',
    id: `demo-role-${d.key}`,
    active: true,
    practitioner: { reference: `Practitioner/demo-practitioner-${d.key}`, display: doctorName(d) },
    specialty: [specialty(s)],
    location: [{ reference: 'Location/demo-location-praxis' }],
    healthcareService: [{ reference: `HealthcareService/demo-hcs-${s.key}`, display: s.name }],
  };
}

function schedule(d: DoctorSpec, s: ServiceSpec, now: Date): Schedule {
  const extension: Schedule['extension'] = [{ url: SCHEDULE_NAME_URL, valueString: `${s.name} ${doctorName(d)}` }];
  if (d.manualConfirmation) extension.push({ url: BOOKING_CONFIRMATION_URL, valueCode: 'manual' });
  return {
    resourceType: 'Schedule',
    id: `demo-schedule-${d.key}`,
    meta: { profile: [ISIK_PROFILE.Schedule] },
    extension,
    active: true,
    serviceType: [serviceType(s)],
    specialty: [specialty(s)],
    // ISiKKalender allows one actor of type Practitioner, HealthcareService or Location (slice
    // Akteur 0..1): the doctor. The service is reachable through serviceType and PractitionerRole.
    actor: [actor(d)],
    planningHorizon: { start: instant(now), end: instant(addDays(now, DEMO_HORIZON_DAYS)) },
    comment: d.manualConfirmation
      ? 'Termine werden nach ärztlicher Sichtung bestätigt.'
      : 'Termine werden sofort bestätigt.',
  };
}

function actor(d: DoctorSpec): Schedule['actor'][number] {
  return { reference: `Practitioner/demo-practitioner-${d.key}`, display: doctorName(d) };
}

/** Free slots starting in [now, now + 30 days), on the doctor's opening hours. */
function freeSlots(d: DoctorSpec, s: ServiceSpec, now: Date): Slot[] {
  const end = addDays(now, DEMO_HORIZON_DAYS).getTime();
  const first = wallDate(now, PRACTICE_TIME_ZONE);
  const windows = slotWindows({ hours: d.hours, slotMinutes: d.slotMinutes, from: first, to: addCalendarDays(first, DEMO_HORIZON_DAYS), timeZone: PRACTICE_TIME_ZONE });
  return windows
    .filter((w) => w.start.getTime() >= now.getTime() && w.start.getTime() < end)
    .map((w) => ({
      resourceType: 'Slot',
      id: `demo-slot-${d.key}-${w.date.replaceAll('-', '')}-${w.time.replace(':', '')}`,
      meta: { profile: [ISIK_PROFILE.Slot] },
      serviceType: [serviceType(s)],
      specialty: [specialty(s)],
      schedule: { reference: `Schedule/demo-schedule-${d.key}` },
      status: 'free',
      start: instant(w.start),
      end: instant(w.end),
    }));
}

/** Seconds precision, as FHIR instants are usually written. */
function instant(t: Date): string {
  return new Date(Math.floor(t.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function addDays(t: Date, days: number): Date {
  return new Date(t.getTime() + days * 86_400_000);
}
