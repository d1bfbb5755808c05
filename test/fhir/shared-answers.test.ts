import { builtOnce, encodedOnce } from '../../src/fhir/shared-answers';

/** Issue 15: answers around a result the window cache shares are built once per request shape. */
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
