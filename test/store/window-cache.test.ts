import type { Bundle, Slot } from '@medplum/fhirtypes';
import request from 'supertest';
import { composeTerminus, type Terminus } from '../../src/app';
import { parseSearch } from '../../src/fhir/search-request';
import { Repository, SearchWindowCache } from '../../src/store';
import { searchCache } from '../../src/server-lib/metrics';
import { asFhir, bookingFixture, FHIR_JSON, freeSlot, parameters, proposal, put, requestor, schedule, type BookingFixture } from '../booking/builders';
import { createTestContext } from '../helpers/context';
import { statementRecorder } from '../helpers/statements';

/**
 * The calendar window cache. Two applications on one store (two replicas); every write
 * path (REST create, update and delete, transaction Bundle, $book, cancellation by PATCH, FHIRPath
 * Patch of a Slot, import, bulk load) changes what both answer at once, and a write rolled back
 * changes nothing. Runs on the store of its project (PostgreSQL, PGlite).
 */
const DAY = '2027-03-01';
const WINDOW = `/fhir/Slot?schedule=Schedule/Cal-W&status=free&start=ge${DAY}&start=le${DAY}&_count=50`;

let a: BookingFixture;
let b: Terminus;

beforeAll(async () => {
  a = await bookingFixture();
  const ctxB = await createTestContext({ db: a.ctx.db });
  b = composeTerminus(ctxB);
  await put(a, schedule('Cal-W'), schedule('Cal-V'), slot('w1', 9), slot('w2', 10), slot('w3', 11));
});

afterAll(async () => {
  await b.stop();
  await a.close();
});

function slot(id: string, hour: number, cal = 'Cal-W', day = DAY): Slot {
  const h = String(hour).padStart(2, '0');
  return freeSlot(id, `${day}T${h}:00:00Z`, `${day}T${h}:30:00Z`, cal);
}

async function hits(): Promise<number> {
  return (await searchCache.get()).values.find((v) => v.labels.result === 'hit')?.value ?? 0;
}

/** The free slots of the window as each application answers, twice each: the second from the cache. */
async function freeIds(): Promise<string[]> {
  const before = await hits();
  const answers: string[][] = [];
  for (const app of [a.app, b.app, a.app, b.app]) {
    const res = await request(app).get(WINDOW);
    expect(res.status).toBe(200);
    answers.push((res.body as Bundle).entry!.map((e) => e.resource!.id!).sort());
  }
  for (const ids of answers) expect(ids).toEqual(answers[0]);
  expect((await hits()) - before).toBeGreaterThanOrEqual(2); // the repeated searches did not reach the store
  return answers[0];
}

const json = (app: Terminus['app'], method: 'post' | 'put' | 'patch', path: string, body: unknown, type = FHIR_JSON) =>
  request(app)[method](path).set('content-type', type).send(JSON.stringify(body));

test('the window is answered from the cache once read', async () => {
  expect(await freeIds()).toEqual(['w1', 'w2', 'w3']);
});

test('a cached window is answered with the same bytes and entity tag per request shape; each shape keeps its own links, format and warnings', async () => {
  const first = await request(a.app).get(WINDOW);
  const again = await request(a.app).get(WINDOW);
  expect(again.text).toBe(first.text);
  expect(again.headers.etag).toBe(first.headers.etag);
  expect((await request(a.app).get(WINDOW).set('if-none-match', first.headers.etag as string)).status).toBe(304);
  // Another shape of the same window (the cache shares the result): its own self link, its own bytes.
  const reordered = `/fhir/Slot?status=free&schedule=Schedule/Cal-W&start=ge${DAY}&start=le${DAY}&_count=50`;
  for (let i = 0; i < 2; i++) {
    const res = await request(a.app).get(reordered);
    expect((res.body as Bundle).link![0].url).toContain('?status=free&schedule=');
    expect((res.body as Bundle).entry!.map((e) => e.resource!.id)).toEqual((first.body as Bundle).entry!.map((e) => e.resource!.id));
  }
  const pretty = await request(a.app).get(`${WINDOW}&_pretty=true`);
  expect(pretty.text).toContain('\n  "resourceType": "Bundle"');
  const xml = await request(a.app).get(WINDOW).set('accept', 'application/fhir+xml');
  expect(xml.headers['content-type']).toContain('application/fhir+xml');
  expect(xml.text).toContain('<Bundle xmlns="http://hl7.org/fhir">');
  expect((await request(a.app).get(WINDOW)).text).toBe(first.text); // the other shapes did not change this one
  const warned = await request(a.app).get(`${WINDOW}&unknown-param=1`);
  const outcomes = (warned.body as Bundle).entry!.filter((e) => e.search?.mode === 'outcome');
  expect(outcomes).toHaveLength(1);
  const strict = await request(a.app).get(`${WINDOW}&unknown-param=1`).set('prefer', 'handling=strict');
  expect(strict.status).toBe(400);
  // A write in the window: a new answer with a new tag.
  const created = await json(a.app, 'post', '/fhir/Slot', { ...slot('y', 13), id: undefined });
  const after = await request(a.app).get(WINDOW);
  expect(after.headers.etag).not.toBe(first.headers.etag);
  expect((after.body as Bundle).entry!.map((e) => e.resource!.id)).toContain(created.body.id);
  expect((await request(a.app).delete(`/fhir/Slot/${created.body.id}`)).status).toBe(200);
});

test('REST create, update and delete of a Slot, on either application, change both answers', async () => {
  await freeIds();
  const created = await json(b.app, 'post', '/fhir/Slot', { ...slot('x', 12), id: undefined });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  expect(await freeIds()).toEqual([id, 'w1', 'w2', 'w3'].sort());

  expect((await json(a.app, 'put', `/fhir/Slot/${id}`, { ...slot(id, 12), status: 'busy' })).status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2', 'w3']);

  expect((await json(a.app, 'put', `/fhir/Slot/${id}`, slot(id, 12))).status).toBe(200);
  expect(await freeIds()).toContain(id);
  expect((await request(b.app).delete(`/fhir/Slot/${id}`)).status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2', 'w3']);
});

test('a Slot moved to another day or calendar leaves the window; one moved in joins it', async () => {
  await freeIds();
  expect((await json(a.app, 'put', '/fhir/Slot/w3', slot('w3', 11, 'Cal-V'))).status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2']);
  expect((await json(b.app, 'put', '/fhir/Slot/w3', slot('w3', 11, 'Cal-W', '2027-03-02'))).status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2']);
  expect((await json(a.app, 'put', '/fhir/Slot/w3', slot('w3', 11))).status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2', 'w3']);
});

test('a transaction Bundle changes both answers; one rolled back changes nothing', async () => {
  await freeIds();
  const bundle = (entries: unknown[]) => ({ resourceType: 'Bundle', type: 'transaction', entry: entries });
  const ok = await json(b.app, 'post', '/fhir', bundle([{ resource: slot('t1', 13), request: { method: 'PUT', url: 'Slot/t1' } }]));
  expect(ok.status).toBe(200);
  expect(await freeIds()).toEqual(['t1', 'w1', 'w2', 'w3']);

  const hitsBefore = await hits();
  const failing = await json(a.app, 'post', '/fhir', bundle([
    { resource: { ...slot('t1', 13), status: 'busy' }, request: { method: 'PUT', url: 'Slot/t1' } },
    { resource: { resourceType: 'Slot', status: 'no-such-status' }, request: { method: 'POST', url: 'Slot' } },
  ]));
  expect(failing.status).toBeGreaterThanOrEqual(400);
  expect(await freeIds()).toEqual(['t1', 'w1', 'w2', 'w3']);
  // The rolled-back write raised no generation: all four answers came from the cache.
  expect((await hits()) - hitsBefore).toBe(4);
});

test('$book on one application takes the slot out of both answers; a PATCH cancellation on the other frees it', async () => {
  await freeIds();
  const booked = await json(a.app, 'post', '/fhir/Appointment/$book', parameters({
    'appt-resource': proposal({ start: `${DAY}T09:00:00Z`, end: `${DAY}T09:30:00Z`, slot: [{ reference: 'Slot/w1' }] }),
  }));
  expect(booked.status).toBe(201);
  expect(await freeIds()).toEqual(['t1', 'w2', 'w3']);

  const cancelled = await json(b.app, 'patch', `/fhir/Appointment/${booked.body.id}`, [{ op: 'replace', path: '/status', value: 'cancelled' }], 'application/json-patch+json');
  expect(cancelled.status).toBe(200);
  expect(await freeIds()).toEqual(['t1', 'w1', 'w2', 'w3']);
});

test('a FHIRPath Patch of a Slot changes both answers', async () => {
  await freeIds();
  const patch = parameters({
    operation: { part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Slot.status' }, { name: 'value', valueCode: 'busy-tentative' }] },
  });
  const res = await json(b.app, 'patch', '/fhir/Slot/t1', patch);
  expect(res.status).toBe(200);
  expect(await freeIds()).toEqual(['w1', 'w2', 'w3']);
});

test('import and bulk load change both answers', async () => {
  await freeIds();
  await put(a, slot('i1', 14));
  expect(await freeIds()).toEqual(['i1', 'w1', 'w2', 'w3']);
  const repo = new Repository(a.ctx.db, a.env.baseUrl, a.ctx.now);
  await repo.bulkLoad([slot('bulk1', 15)]);
  expect(await freeIds()).toEqual(['bulk1', 'i1', 'w1', 'w2', 'w3']);
});

test('a write in another window or calendar keeps this window cached', async () => {
  await freeIds();
  const hitsBefore = await hits();
  await put(a, slot('far', 9, 'Cal-W', '2027-03-20'), slot('other', 9, 'Cal-V'));
  await freeIds();
  expect((await hits()) - hitsBefore).toBe(4);
});

test('a window with a resource owned by an institution is cached per viewer: others never see it', async () => {
  const day = '2027-04-01';
  const query: [string, string][] = [['schedule', 'Schedule/Cal-W'], ['status', 'free'], ['start', `ge${day}`], ['start', `le${day}`]];
  await put(a, slot('pub', 9, 'Cal-W', day));
  const repo = new Repository(a.ctx.db, a.env.baseUrl, a.ctx.now);
  await repo.create({ ...slot('ignored', 10, 'Cal-W', day), id: undefined }, { owner: '1-INST-A' });
  const idsAs = async (who: 'A' | 'B' | 'all') => {
    const res = await asFhir(a, { method: 'GET', path: ['Slot'], query }, who === 'all' ? undefined : requestor(who === 'A' ? '1-INST-A' : '1-INST-B'));
    expect(res.status).toBe(200);
    return ((res.body as Bundle).entry ?? []).length;
  };
  for (let round = 0; round < 2; round++) {
    expect(await idsAs('A')).toBe(2);
    expect(await idsAs('B')).toBe(1);
    expect(await idsAs('all')).toBe(2);
  }
});

test('searches of several windows at the same moment read their stamps in one statement; a write between two such moments is seen by the next', async () => {
  const days = ['2027-05-03', '2027-05-04', '2027-05-05'];
  await put(a, ...days.map((day, i) => slot(`st${i}`, 9, 'Cal-W', day)));
  const repo = new Repository(a.ctx.db, a.env.baseUrl, a.ctx.now, [], new SearchWindowCache(100));
  const request = (day: string) => parseSearch('Slot', [['schedule', 'Schedule/Cal-W'], ['status', 'free'], ['start', `ge${day}`], ['start', `le${day}`]]).request;
  const ids = async () => (await Promise.all([...days, ...days].map((d) => repo.search(request(d))))).map((r) => r.matches.map((m) => m.id).join());
  const recorder = statementRecorder();
  recorder.start();
  try {
    expect(await ids()).toEqual(['st0', 'st1', 'st2', 'st0', 'st1', 'st2']);
    expect(recorder.sent.filter((q) => q.includes('search_generation'))).toHaveLength(1);
    recorder.sent.length = 0;
    await put(a, slot('st1b', 10, 'Cal-W', days[1]));
    expect(await ids()).toEqual(['st0', 'st1,st1b', 'st2', 'st0', 'st1,st1b', 'st2']);
    expect(recorder.sent.filter((q) => q.includes('search_generation') && !q.includes('INSERT'))).toHaveLength(1);
  } finally {
    recorder.stop();
  }
});
