import { builtOnce, encodedOnce } from '../../src/fhir/shared-answers';
import { parseFhirSearch } from '../../src/fhir/search';
import { parseSearch } from '../../src/fhir/search-request';
import { Memo } from '../../src/server-lib/frozen';

/** Answers around a result the window cache shares are built once per request shape. */
test('a frozen result gets one answer per shape, built once; an unfrozen one gets a new answer every time', () => {
  let builds = 0;
  const build = () => ({ n: ++builds });
  const shared = Object.freeze({ resources: [] });
  const first = builtOnce(shared, 'a', build);
  expect(builtOnce(shared, 'a', build)).toBe(first);
  expect(Object.isFrozen(first)).toBe(true);
  expect(builtOnce(shared, 'b', build)).not.toBe(first);
  expect(builds).toBe(2);
  const own = { resources: [] };
  expect(builtOnce(own, 'a', build)).not.toBe(builtOnce(own, 'a', build));
  expect(builds).toBe(4);
});

test('a shared result keeps a few shapes, the oldest going first', () => {
  let builds = 0;
  const shared = Object.freeze({});
  const shapes = ['a', 'b', 'c', 'd', 'e'];
  for (const s of shapes) builtOnce(shared, s, () => ({ s, n: ++builds }));
  expect(builtOnce(shared, 'e', () => ({ s: 'e', n: ++builds })).n).toBe(5);
  expect(builtOnce(shared, 'a', () => ({ s: 'a', n: ++builds })).n).toBe(6); // 'a' was let go
});

test('the bytes of a frozen body are encoded once per format', () => {
  let encodes = 0;
  const body = Object.freeze({ resourceType: 'Bundle' });
  const encode = () => ({ bytes: Buffer.from(String(++encodes)) });
  expect(encodedOnce(body, 'json', encode).bytes.toString()).toBe('1');
  expect(encodedOnce(body, 'json', encode).bytes.toString()).toBe('1');
  expect(encodedOnce(body, 'xml', encode).bytes.toString()).toBe('2');
  expect(encodedOnce({ resourceType: 'Bundle' }, 'json', encode).bytes.toString()).toBe('3');
});

/** The enforcement point and the search parse the same query; each distinct query is parsed once. */
test('a query is parsed once and shared frozen; the handling is part of the query; a bad one throws every time', () => {
  const pairs: [string, string][] = [['schedule', 'Schedule/s1'], ['status', 'free'], ['start', 'ge2030-01-01'], ['start', 'le2030-01-02'], ['nonsense', 'x']];
  const first = parseSearch('Slot', pairs);
  expect(parseSearch('Slot', pairs.map(([n, v]) => [n, v]))).toBe(first);
  expect(Object.isFrozen(first.request.filters[0].values)).toBe(true);
  expect(Object.isFrozen(first.warnings[0])).toBe(true);
  expect(() => (first.request.filters as unknown[]).push({})).toThrow(TypeError);
  expect(first.warnings).toHaveLength(1);
  expect(() => parseSearch('Slot', pairs, true)).toThrow(/nonsense/);
  expect(parseSearch('Slot', pairs.slice(0, 4))).not.toBe(first);
  for (let i = 0; i < 2; i++) expect(() => parseSearch('Slot', [['_count', 'many']])).toThrow(/_count/);
  // A long query is not kept (the memo's memory stays bounded): parsed anew, not frozen.
  const long: [string, string][] = [['schedule', `Schedule/${'x'.repeat(2000)}`]];
  expect(parseSearch('Slot', long)).not.toBe(parseSearch('Slot', long));
  expect(Object.isFrozen(parseSearch('Slot', long).request)).toBe(false);
});

test('a calendar query the clock completes (schedule without start) is parsed for its request alone; a full one is shared', () => {
  const request = (query: [string, string][]) => ({ method: 'GET', path: ['Slot'], query, headers: {} });
  const open: [string, string][] = [['schedule', 'Schedule/s1'], ['status', 'free']];
  const fromNow = parseFhirSearch('Slot', request(open), new Date('2030-01-01T08:00:00Z'));
  expect(Object.isFrozen(fromNow.request)).toBe(false);
  expect(fromNow.request.filters.find((f) => f.param === 'start')?.values).toEqual(['ge2030-01-01T08:00:00.000Z']);
  expect(parseFhirSearch('Slot', request(open), new Date('2030-01-01T08:00:00Z'))).not.toBe(fromNow);
  const bounded: [string, string][] = [...open, ['start', 'ge2030-01-01'], ['start', 'le2030-01-02']];
  const shared = parseFhirSearch('Slot', request(bounded), new Date());
  expect(Object.isFrozen(shared.request)).toBe(true);
  expect(parseFhirSearch('Slot', request(bounded), new Date())).toBe(shared);
});

test('a memo keeps its most recently used keys and does not remember a throw', () => {
  const memo = new Memo<{ k: string }>(2);
  let made = 0;
  const get = (k: string) => memo.get(k, () => (made++, { k }));
  const a = get('a');
  get('b');
  expect(get('a')).toBe(a); // 'a' is now the most recent
  get('c'); // 'b' goes
  expect(made).toBe(3);
  expect(get('a')).toBe(a);
  get('b');
  expect(made).toBe(4);
  expect(() => memo.get('x', () => { throw new Error('no'); })).toThrow('no');
  expect(memo.get('x', () => ({ k: 'x' }))).toEqual({ k: 'x' });
});
