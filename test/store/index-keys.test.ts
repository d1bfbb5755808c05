import request from 'supertest';
import type { Express } from 'express';
import { createApp } from '../../src/app';
import type { AppContext } from '../../src/context';
import { indexKey, KEY_BYTES } from '../../src/store/search/index-key';
import { prng } from '../fuzz/cases';
import { createTestContext } from '../helpers/context';

const FHIR_JSON = 'application/fhir+json';

/** Code points `from` to `to` (slice would cut an emoji's surrogate pair). */
const cut = (s: string, from: number, to?: number) => Array.from(s).slice(from, to).join('');

/** `n` random code points from every plane a name could use (Latin, Cyrillic, CJK, emoji), seeded. */
function randomText(seed: number, n: number): string {
  const next = prng(seed);
  const ranges: [number, number][] = [
    [0x41, 0x5a],
    [0xc0, 0x24f],
    [0x400, 0x4ff],
    [0x4e00, 0x9fff],
    [0x1f600, 0x1f64f],
  ];
  let out = '';
  for (let i = 0; i < n; i++) {
    const [lo, hi] = ranges[Math.floor(next() * ranges.length)];
    out += String.fromCodePoint(lo + Math.floor(next() * (hi - lo + 1)));
  }
  return out;
}

/**
 * Values far beyond a btree entry's 2,704 bytes that PostgreSQL cannot compress below it (an
 * outside fuzzer's Patients answered 500 "index row size 5808 exceeds btree version 4 maximum
 * 2704 for index search_token_lookup"): stored, found by exact, prefix and substring searches,
 * and not found by a value that differs only past the part a key keeps.
 */
describe('long values in indexed search columns', () => {
  let ctx: AppContext;
  let app: Express;
  const system = `urn:oid:1.2.276.0.76.4.${'9'.repeat(40)}/${randomText(7, 300)}`;
  const value = randomText(1, 3000);
  const family = randomText(2, 5000);
  const url = `http://example.org/${randomText(3, 2000)}`;

  /** `Type?query` as a form POST to `_search`: these queries outgrow a request line. */
  const search = async (query: string) => {
    const [type, form] = query.split('?');
    const res = await request(app).post(`/fhir/${type}/_search`).set('Accept', FHIR_JSON).type('form').send(form);
    expect(res.status).toBe(200);
    return ((res.body.entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id).sort();
  };

  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    await request(app)
      .put('/fhir/Patient/long-1')
      .set('Content-Type', FHIR_JSON)
      .send({ resourceType: 'Patient', id: 'long-1', identifier: [{ system, value }], name: [{ family, given: ['Erika'] }] })
      .expect(201);
    // The same first 64 characters, then something else: a key's prefix alone must not match.
    await request(app)
      .put('/fhir/Patient/long-2')
      .set('Content-Type', FHIR_JSON)
      .send({ resourceType: 'Patient', id: 'long-2', identifier: [{ system, value: `${cut(value, 0, 200)}x${cut(value, 201)}` }], name: [{ family: `${cut(family, 0, 300)}Q` }] })
      .expect(201);
    await request(app).put('/fhir/CodeSystem/long-cs').set('Content-Type', FHIR_JSON).send({ resourceType: 'CodeSystem', id: 'long-cs', url, status: 'active', content: 'complete' }).expect(201);
  });
  afterAll(() => ctx.db.close());

  test('a key is the value up to its byte bound, else a bounded prefix and hash', () => {
    expect(indexKey('free')).toBe('free');
    const long = indexKey(value);
    expect(long).not.toBe(value);
    expect(Buffer.byteLength(long)).toBeGreaterThan(KEY_BYTES);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(4 * 64 + 65);
    expect(indexKey('é'.repeat(64))).toBe('é'.repeat(64));
    expect(indexKey('é'.repeat(65))).not.toBe('é'.repeat(65));
  });

  test('the key the database computes (rows written before the bound) is the one the server computes', async () => {
    for (const v of [value, family.normalize('NFD'), url, 'x'.repeat(129), '\u{1F600}'.repeat(40)]) {
      const { rows } = await ctx.db.query<{ k: string }>(`SELECT left($1::text, 64) || ':' || encode(sha256(convert_to($1::text, 'UTF8')), 'hex') AS k`, [v]);
      expect(rows[0].k).toBe(indexKey(v));
    }
  });

  test('token: exact match on system and value, nothing for a value that differs past the key prefix', async () => {
    expect(await search(`Patient?identifier=${encodeURIComponent(`${system}|${value}`)}`)).toEqual(['long-1']);
    expect(await search(`Patient?identifier=${encodeURIComponent(value)}`)).toEqual(['long-1']);
    expect(await search(`Patient?identifier=${encodeURIComponent(`${system}|`)}`)).toEqual(['long-1', 'long-2']);
    expect(await search(`Patient?identifier=${encodeURIComponent(`${cut(value, 0, 200)}y${cut(value, 201)}`)}`)).toEqual([]);
  });

  test('string: prefix short and long, substring, exact', async () => {
    expect(await search(`Patient?family=${encodeURIComponent(cut(family, 0, 10))}`)).toEqual(['long-1', 'long-2']);
    expect(await search(`Patient?family=${encodeURIComponent(cut(family, 0, 250))}`)).toEqual(['long-1', 'long-2']);
    expect(await search(`Patient?family=${encodeURIComponent(cut(family, 0, 1000))}`)).toEqual(['long-1']);
    expect(await search(`Patient?family=${encodeURIComponent(`${cut(family, 0, 300)}Q`)}`)).toEqual(['long-2']);
    expect(await search(`Patient?family:contains=${encodeURIComponent(cut(family, 2000, 2100))}`)).toEqual(['long-1']);
    expect(await search(`Patient?family:exact=${encodeURIComponent(family)}`)).toEqual(['long-1']);
    expect(await search(`Patient?family:exact=${encodeURIComponent(cut(family, 0, 4999))}`)).toEqual([]);
  });

  test('uri: equality, :below and :above on a long URL', async () => {
    expect(await search(`CodeSystem?url=${encodeURIComponent(url)}`)).toEqual(['long-cs']);
    expect(await search(`CodeSystem?url:below=${encodeURIComponent(cut(url, 0, 500))}`)).toEqual(['long-cs']);
    expect(await search(`CodeSystem?url:above=${encodeURIComponent(`${url}/more`)}`)).toEqual(['long-cs']);
  });

  test('sorting by a long string works', async () => {
    const res = await request(app).get(`/fhir/Patient?_sort=family&family=${encodeURIComponent(cut(family, 0, 10))}`).set('Accept', FHIR_JSON).expect(200);
    const ids = (res.body.entry as { resource: { id: string } }[]).map((e) => e.resource.id);
    expect(ids.sort()).toEqual(['long-1', 'long-2']);
  });

  test('a reference whose type or Schedule id is thousands of characters is stored (or refused 4xx), never 500', async () => {
    const slot = await request(app)
      .post('/fhir/Slot')
      .set('Content-Type', FHIR_JSON)
      .send({ resourceType: 'Slot', schedule: { reference: `Schedule/${randomText(4, 3000)}` }, status: 'free', start: '2031-01-01T08:00:00Z', end: '2031-01-01T08:15:00Z' });
    expect(slot.status).toBeLessThan(500);
    const appointment = await request(app)
      .post('/fhir/Appointment')
      .set('Content-Type', FHIR_JSON)
      .send({ resourceType: 'Appointment', status: 'proposed', participant: [{ actor: { reference: `${'Q'.repeat(4000)}/x` }, status: 'needs-action' }] });
    expect(appointment.status).toBeLessThan(500);
  });
});
