import { GuardClient, generateEcKey } from '../../src/client';
import { guardedLoad } from '../../bench/curve/guarded';

// The volume curve's guarded load signs each request's DPoP proof ahead of a run, bound to the
// request's method and URL (RFC 9449 §4.2) and to the caller's token; signed requests a run did not
// send wait for the next; once a bounded supply (free slots to book, appointments to cancel) is out,
// a connection sends another connection's signed request instead, and past that the load says so.

const URL_BASE = 'http://127.0.0.1:9';

function claims(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

async function callers(n: number) {
  return Promise.all(Array.from({ length: n }, async (_, i) => ({ client: new GuardClient({ server: URL_BASE, dpopKey: await generateEcKey() }), token: `token-${i}` })));
}

test('proofs signed ahead name the method and the URL without the query, under the caller\'s token', async () => {
  let k = 0;
  const load = guardedLoad(URL_BASE, await callers(2), () => ({ method: 'PATCH', path: `/fhir/Appointment/a-${k++}?x=1`, body: '[]', contentType: 'application/json-patch+json' }));
  await load.presign(3);
  expect(load.queued()).toBe(6);
  const req = await load.next(1);
  expect(req.headers?.authorization).toBe('DPoP token-1');
  expect(req.headers?.['content-type']).toBe('application/json-patch+json');
  const proof = claims(req.headers!.dpop);
  expect(proof.htm).toBe('PATCH');
  expect(proof.htu).toBe(`${URL_BASE}${req.path.split('?')[0]}`);
  expect(typeof proof.ath).toBe('string');
  expect(load.queued()).toBe(5);
});

test('a bounded supply: left-over signed requests are sent by any connection, each once, then the load stops', async () => {
  const supply = ['s0', 's1', 's2', 's3', 's4'];
  const load = guardedLoad(URL_BASE, await callers(2), () => {
    const s = supply.shift();
    return s ? { method: 'POST', path: `/fhir/Appointment/$book?slot=${s}` } : undefined;
  });
  await load.presign(2);
  expect(load.queued()).toBe(4);
  const sent: string[] = [];
  for (let i = 0; i < 5; i++) sent.push((await load.next(0)).path);
  expect(sent.sort()).toEqual(['s0', 's1', 's2', 's3', 's4'].map((s) => `/fhir/Appointment/$book?slot=${s}`));
  await expect(load.next(1)).rejects.toThrow(/ran out of requests/);
});
