import request from 'supertest';
import type { Resource, Slot } from '@medplum/fhirtypes';
import { retireFreeSlots } from '../../src/booking';
import { loadConfig } from '../../src/config';
import { bookingFixture, FHIR_JSON, freeSlot, proposal, put, type BookingFixture } from './builders';

// Past free slots retired (SLOT_RETENTION_DAYS): expunged with every index row, their lookup row
// and their history; slots an appointment names, busy slots and recent ones stay; the calendar's
// cached window sees it; two replicas retiring at once share the work.

let f: BookingFixture;
beforeAll(async () => {
  f = await bookingFixture();
});
afterAll(() => f.close());

const CUTOFF = new Date('2027-04-01T00:00:00Z');
const day = (d: string, h = 9) => [`2027-${d}T${String(h).padStart(2, '0')}:00:00Z`, `2027-${d}T${String(h).padStart(2, '0')}:30:00Z`] as const;
const book = (slot: Slot) =>
  request(f.app)
    .post('/fhir/Appointment/$book')
    .set('Content-Type', FHIR_JSON)
    .send(JSON.stringify({ ...proposal({ start: slot.start, end: slot.end }), slot: [{ reference: `Slot/${slot.id}` }] }));

/** Rows the store keeps of one Slot: resource, versions, lookup and every search index table. */
async function rowsOf(id: string): Promise<Record<string, number>> {
  const { rows: tables } = await f.ctx.db.query<{ table_name: string }>(
    "SELECT table_name FROM information_schema.columns WHERE column_name = 'resource_type' AND table_name LIKE 'search\\_%' AND table_schema = current_schema() AND table_name <> 'search_generation' ORDER BY 1",
  );
  const out: Record<string, number> = {};
  for (const t of ['resource', 'resource_version', ...tables.map((r) => r.table_name)]) {
    const { rows } = await f.ctx.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${t} WHERE resource_type = 'Slot' AND id = $1`, [id]);
    out[t] = Number(rows[0].n);
  }
  const { rows } = await f.ctx.db.query<{ n: string }>('SELECT count(*) AS n FROM booking_slot WHERE slot_id = $1', [id]);
  out.booking_slot = Number(rows[0].n);
  return out;
}

test('free slots ended before the cutoff go, with every row; booked, cancelled-appointment, busy, recent and future slots stay', async () => {
  const slots = {
    oldFree: freeSlot('Retire-Old-Free', ...day('03-01')),
    oldFree2: freeSlot('Retire-Old-Free-2', ...day('03-01', 10)),
    oldBooked: freeSlot('Retire-Old-Booked', ...day('03-02')),
    oldCancelled: freeSlot('Retire-Old-Cancelled', ...day('03-03')),
    oldBusy: { ...freeSlot('Retire-Old-Busy', ...day('03-04')), status: 'busy' } as Slot,
    recent: freeSlot('Retire-Recent-Free', ...day('04-20')),
    future: freeSlot('Retire-Future-Free', ...day('06-01')),
  };
  await put(f, ...(Object.values(slots) as Resource[]));
  const booked = await book(slots.oldBooked);
  expect(booked.status).toBe(201);
  const cancelled = await book(slots.oldCancelled);
  expect(cancelled.status).toBe(201);
  const patch = await request(f.app).patch(`/fhir/Appointment/${cancelled.body.id}`).set('Content-Type', 'application/json-patch+json').send(JSON.stringify([{ op: 'replace', path: '/status', value: 'cancelled' }]));
  expect(patch.status).toBe(200);
  expect((await request(f.app).get('/fhir/Slot/Retire-Old-Cancelled')).body.status).toBe('free');
  // The calendar's window, read (and cached) before.
  const window = '/fhir/Slot?schedule=Schedule/Schedule-Read-Example&start=ge2027-03-01&start=lt2027-03-05&_count=50';
  const ids = async () => ((await request(f.app).get(window)).body.entry ?? []).map((e: { resource: { id: string } }) => e.resource.id).sort();
  expect(await ids()).toEqual(['Retire-Old-Booked', 'Retire-Old-Busy', 'Retire-Old-Cancelled', 'Retire-Old-Free', 'Retire-Old-Free-2']);
  expect(await rowsOf('Retire-Old-Free')).toMatchObject({ resource: 1, booking_slot: 1, search_compound: 1, search_reference: 1, search_token: expect.any(Number) });

  const retired = await retireFreeSlots(f.env.repo, CUTOFF);
  expect(retired).toBeGreaterThanOrEqual(2);

  for (const gone of ['Retire-Old-Free', 'Retire-Old-Free-2']) {
    expect(Object.entries(await rowsOf(gone)).filter(([, n]) => n > 0)).toEqual([]);
    expect((await request(f.app).get(`/fhir/Slot/${gone}`)).status).toBe(404);
    expect((await request(f.app).get(`/fhir/Slot/${gone}/_history`)).status).toBe(404);
  }
  for (const kept of ['Retire-Old-Booked', 'Retire-Old-Cancelled', 'Retire-Old-Busy', 'Retire-Recent-Free', 'Retire-Future-Free']) {
    expect((await request(f.app).get(`/fhir/Slot/${kept}`)).status).toBe(200);
  }
  expect(await ids()).toEqual(['Retire-Old-Booked', 'Retire-Old-Busy', 'Retire-Old-Cancelled']);
  // The appointments keep their slot references and still read.
  expect((await request(f.app).get(`/fhir/Appointment/${booked.body.id}`)).body.slot).toEqual([{ reference: 'Slot/Retire-Old-Booked' }]);
  // A second run finds nothing more.
  expect(await retireFreeSlots(f.env.repo, CUTOFF)).toBe(0);
});

test('two replicas retiring at once take disjoint batches: every slot once, no error', async () => {
  const many = Array.from({ length: 450 }, (_, i) => {
    const start = new Date(Date.UTC(2027, 1, 1, 8) + i * 3_600_000);
    return freeSlot(`Retire-Many-${i}`, start.toISOString(), new Date(start.getTime() + 1_800_000).toISOString());
  });
  await f.env.repo.bulkLoad(many);
  const [a, b] = await Promise.all([retireFreeSlots(f.env.repo, CUTOFF, 40), retireFreeSlots(f.env.repo, CUTOFF, 40)]);
  expect(a + b).toBe(450);
  const { rows } = await f.ctx.db.query<{ n: string }>("SELECT count(*) AS n FROM resource WHERE resource_type = 'Slot' AND id LIKE 'Retire-Many-%'");
  expect(Number(rows[0].n)).toBe(0);
});

test('SLOT_RETENTION_DAYS: 30 by default, 0 keeps every slot, anything else is refused naming it', () => {
  expect(loadConfig({ PUBLIC_URL: 'http://localhost:8080' }).slotRetentionDays).toBe(30);
  expect(loadConfig({ PUBLIC_URL: 'http://localhost:8080', SLOT_RETENTION_DAYS: '0' }).slotRetentionDays).toBe(0);
  expect(() => loadConfig({ PUBLIC_URL: 'http://localhost:8080', SLOT_RETENTION_DAYS: 'a month' })).toThrow(/SLOT_RETENTION_DAYS/);
});
