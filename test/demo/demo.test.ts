import type { CodeSystem, Practitioner, Resource, Schedule, Slot } from '@medplum/fhirtypes';
import { validateResource } from '../../src/model/validation';
import { BOOKING_CONFIRMATION_URL } from '../../src/booking';
import { DEMO_HORIZON_DAYS, demoResources } from '../../src/demo';

// A Saturday evening in November (CET, UTC+1): the next 30 days hold 21 or 22 weekdays.
const NOW = new Date('2026-11-21T22:35:00Z');

const ofType = <T extends Resource>(rs: Resource[], type: T['resourceType']): T[] =>
  rs.filter((r): r is T => r.resourceType === type);

describe('demoResources', () => {
  const resources = demoResources(NOW);
  const slots = ofType<Slot>(resources, 'Slot');
  const schedules = ofType<Schedule>(resources, 'Schedule');

  test('every demo resource passes validation, ISiK profiles included', () => {
    const failures = resources
      .map((r) => ({ id: r.id, result: validateResource(r) }))
      .filter((f) => !f.result.ok);
    expect(failures).toEqual([]);
  });

  test('is a practice with two services, three doctors with a calendar each, and service code systems', () => {
    const count = (type: string): number => resources.filter((r) => r.resourceType === type).length;
    expect(count('HealthcareService')).toBe(2);
    expect(count('Practitioner')).toBe(3);
    expect(count('Schedule')).toBe(3);
    expect(count('CodeSystem')).toBeGreaterThanOrEqual(1);
    expect(new Set(schedules.map((s) => s.actor[0].reference))).toEqual(
      new Set(ofType<Practitioner>(resources, 'Practitioner').map((p) => `Practitioner/${p.id}`)),
    );
  });

  test('ids are stable, unique and prefixed demo-', () => {
    const ids = resources.map((r) => `${r.resourceType}/${r.id}`);
    expect(new Set(ids).size).toBe(ids.length);
    expect(resources.every((r) => r.id?.startsWith('demo-'))).toBe(true);
  });

  test('is deterministic given now', () => {
    expect(demoResources(new Date(NOW))).toEqual(resources);
  });

  test('keeps the ids of slots that are still ahead when now moves on', () => {
    const later = demoResources(new Date(NOW.getTime() + 3 * 86_400_000));
    const laterIds = new Set(ofType<Slot>(later, 'Slot').map((s) => s.id));
    const stillAhead = slots.filter((s) => Date.parse(s.start) >= NOW.getTime() + 3 * 86_400_000);
    expect(stillAhead.length).toBeGreaterThan(0);
    expect(stillAhead.every((s) => laterIds.has(s.id))).toBe(true);
  });

  test('offers free slots from now for the next 30 days, every calendar, on weekdays only', () => {
    const horizon = NOW.getTime() + DEMO_HORIZON_DAYS * 86_400_000;
    expect(slots.length).toBeGreaterThan(500);
    expect(slots.every((s) => s.status === 'free')).toBe(true);
    expect(slots.every((s) => Date.parse(s.start) >= NOW.getTime() && Date.parse(s.start) < horizon)).toBe(true);
    const lastStart = Math.max(...slots.map((s) => Date.parse(s.start)));
    expect(horizon - lastStart).toBeLessThan(4 * 86_400_000);
    for (const schedule of schedules) {
      expect(slots.some((s) => s.schedule.reference === `Schedule/${schedule.id}`)).toBe(true);
    }
    const berlinWeekday = (t: string): string =>
      new Intl.DateTimeFormat('en-US', { timeZone: 'Europe/Berlin', weekday: 'short' }).format(new Date(t));
    expect(new Set(slots.map((s) => berlinWeekday(s.start)))).toEqual(new Set(['Mon', 'Tue', 'Wed', 'Thu', 'Fri']));
  });

  test('slots are 15 or 30 minutes long, within opening hours (Berlin time), and never overlap', () => {
    const minutes = new Set(slots.map((s) => (Date.parse(s.end) - Date.parse(s.start)) / 60_000));
    expect(minutes).toEqual(new Set([15, 30]));
    const hour = (t: string): number =>
      Number(new Intl.DateTimeFormat('en-US', { timeZone: 'Europe/Berlin', hour: 'numeric', hourCycle: 'h23' }).format(new Date(t)));
    expect(slots.every((s) => hour(s.start) >= 8 && hour(s.end) <= 19)).toBe(true);
    for (const schedule of schedules) {
      const own = slots
        .filter((s) => s.schedule.reference === `Schedule/${schedule.id}`)
        .sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
      own.slice(1).forEach((s, i) => expect(Date.parse(s.start)).toBeGreaterThanOrEqual(Date.parse(own[i].end)));
    }
  });

  test('one calendar needs manual confirmation', () => {
    const manual = schedules.filter((s) =>
      s.extension?.some((e) => e.url === BOOKING_CONFIRMATION_URL && e.valueCode === 'manual'),
    );
    expect(manual).toHaveLength(1);
  });

  test('calendars carry the ISiKKalender name extension, serviceType text and coding, and a specialty', () => {
    for (const s of schedules) {
      expect(s.extension?.find((e) => e.url.endsWith('extension-Schedule.name'))?.valueString).toBeTruthy();
      expect(s.serviceType?.[0].text).toBeTruthy();
      expect(s.serviceType?.[0].coding?.length).toBeGreaterThan(0);
      expect(s.specialty?.[0].coding?.[0].system).toBe('http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen');
      expect(s.actor[0].display).toBeTruthy();
    }
  });

  test('code systems of the service coding are discoverable by context-type-value (ISiK Terminplanung 6.0.0)', () => {
    const codeSystems = ofType<CodeSystem>(resources, 'CodeSystem');
    const usedSystems = new Set(schedules.flatMap((s) => s.serviceType?.flatMap((t) => t.coding?.map((c) => c.system)) ?? []));
    for (const system of usedSystems) {
      const cs = codeSystems.find((c) => c.url === system);
      expect(cs).toBeDefined();
      for (const type of ['HealthcareService', 'Schedule']) {
        expect(cs?.useContext).toContainEqual({
          code: { system: 'https://gematik.de/fhir/isik/CodeSystem/ContextType', code: 'ResourceUsage' },
          valueCodeableConcept: { coding: [{ system: 'http://hl7.org/fhir/resource-types', code: type }] },
        });
      }
    }
  });

  test('opening hours follow Berlin local time across the DST change', () => {
    const march = ofType<Slot>(demoResources(new Date('2027-03-20T00:00:00Z')), 'Slot');
    const first = (date: string): string | undefined =>
      march.find((s) => s.id === `demo-slot-weber-${date}-0800`)?.start;
    expect(first('20270326')).toBe('2027-03-26T07:00:00Z'); // CET
    expect(first('20270329')).toBe('2027-03-29T06:00:00Z'); // CEST
  });
});
