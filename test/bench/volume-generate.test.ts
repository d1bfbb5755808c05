import request from 'supertest';
import type { Appointment, Resource, Slot } from '@medplum/fhirtypes';
import { composeTerminus } from '../../src/app';
import { DEFAULT_VOLUME, loadVolume, volumeResources, type VolumeSpec } from '../../bench/volume/generate';
import { createTestContext } from '../helpers/context';

// The volume generator of the scale benchmarks makes calendars a practice would publish: opening
// hours with a break, closed on Sundays and public holidays, a share booked and cancelled; the data
// loads, validates as the repository reads it, and books.

const spec = (o: Partial<VolumeSpec> = {}): VolumeSpec => ({ ...DEFAULT_VOLUME, calendars: 8, patients: 50, slots: 4000, start: new Date(Date.UTC(2027, 2, 22)), ...o });

function all(s: VolumeSpec): Resource[] {
  const out: Resource[] = [];
  const gen = volumeResources(s);
  for (let r = gen.next(); !r.done; r = gen.next()) out.push(...r.value);
  return out;
}

test('slots within opening hours, none on Sundays or public holidays (Good Friday, Easter Monday 2027), Wednesday afternoons closed for some', () => {
  const resources = all(spec());
  const slots = resources.filter((r): r is Slot => r.resourceType === 'Slot');
  expect(slots).toHaveLength(4000);
  const days = new Set(slots.map((s) => s.start!.slice(0, 10)));
  expect(days.has('2027-03-26')).toBe(false);
  expect(days.has('2027-03-29')).toBe(false);
  expect(days.has('2027-03-25')).toBe(true);
  for (const s of slots) {
    const start = new Date(s.start!);
    expect(start.getUTCDay()).not.toBe(0);
    // 08:00-12:00 and 13:00-17:00 at UTC+1
    const minutes = start.getUTCHours() * 60 + start.getUTCMinutes() + 60;
    expect((minutes >= 480 && minutes < 720) || (minutes >= 780 && minutes < 1020)).toBe(true);
    expect(new Date(s.end!).getTime() - start.getTime()).toBe(15 * 60_000);
  }
  const wednesdayAfternoon = slots.filter((s) => s.schedule.reference === 'Schedule/vol-schedule-0' && new Date(s.start!).getUTCDay() === 3 && new Date(s.start!).getUTCHours() >= 12);
  expect(wednesdayAfternoon).toEqual([]);
});

test('a share booked, a share of those cancelled; every appointment names a slot of its state; deterministic', () => {
  const resources = all(spec({ slots: 20_000 }));
  const slots = new Map(resources.filter((r): r is Slot => r.resourceType === 'Slot').map((s) => [s.id, s]));
  const appointments = resources.filter((r): r is Appointment => r.resourceType === 'Appointment');
  expect(appointments.length / slots.size).toBeGreaterThan(0.32);
  expect(appointments.length / slots.size).toBeLessThan(0.38);
  const cancelled = appointments.filter((a) => a.status === 'cancelled');
  expect(cancelled.length / appointments.length).toBeGreaterThan(0.05);
  expect(cancelled.length / appointments.length).toBeLessThan(0.11);
  for (const a of appointments) {
    const slot = slots.get(a.slot![0].reference!.slice('Slot/'.length))!;
    expect(slot.status).toBe(a.status === 'booked' ? 'busy' : 'free');
    expect([a.start, a.end]).toEqual([slot.start, slot.end]);
  }
  expect(JSON.stringify(all(spec({ slots: 500 })))).toBe(JSON.stringify(all(spec({ slots: 500 }))));
});

test('the volume loads with its booking holds, searches and books through the application; a booked slot cannot be booked again', async () => {
  const ctx = await createTestContext({ env: { GUARD_ENFORCEMENT: 'off' } });
  const terminus = composeTerminus(ctx);
  try {
    // Statements of 100 rows, one at a time: each stays well inside the store's 3 s answer bound on a busy CI machine.
    const report = await loadVolume(terminus.fhir.repo, spec({ slots: 600 }), { parallel: 1, statementRows: 100 });
    expect(report).toMatchObject({ slots: 600, calendars: 8, patients: 50 });
    const counts = await ctx.db.query<{ booked: string; holds: string; reservations: string }>(
      "SELECT (SELECT count(*) FROM resource WHERE resource_type = 'Appointment' AND content->>'status' = 'booked') AS booked, (SELECT count(*) FROM booking_slot_hold) AS holds, (SELECT count(*) FROM booking_reservation) AS reservations",
    );
    const { booked: n, holds, reservations } = counts.rows[0];
    expect([Number(holds), Number(reservations)]).toEqual([Number(n), Number(n)]);
    expect(Number(n)).toBeGreaterThan(100);
    const res = await request(terminus.app).get('/fhir/Slot?schedule=Schedule/vol-schedule-1&status=free&_count=3');
    expect(res.status).toBe(200);
    const free = res.body.entry[0].resource as Slot;
    const proposal = (slot: Slot) => ({ resourceType: 'Appointment', status: 'proposed', start: slot.start, end: slot.end, serviceType: slot.serviceType, specialty: slot.specialty, slot: [{ reference: `Slot/${slot.id}` }], participant: [{ actor: { reference: 'Patient/vol-patient-7' }, status: 'accepted' }] });
    const booked = await request(terminus.app).post('/fhir/Appointment/$book').set('Content-Type', 'application/fhir+json').send(JSON.stringify(proposal(free)));
    expect([booked.status, booked.body.status]).toEqual([201, 'booked']);
    const busy = (await request(terminus.app).get('/fhir/Appointment?status=booked&_count=1')).body.entry[0].resource as Appointment;
    const slot = (await request(terminus.app).get(`/fhir/${busy.slot![0].reference}`)).body as Slot;
    const again = await request(terminus.app).post('/fhir/Appointment/$book').set('Content-Type', 'application/fhir+json').send(JSON.stringify(proposal({ ...slot, status: 'free' })));
    expect(again.status).toBe(409);
  } finally {
    await terminus.stop();
    await ctx.db.close();
  }
});
