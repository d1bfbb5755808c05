import { Writable } from 'node:stream';
import pino from 'pino';
import { call, decodePayload, institution, pepHarness, type PepHarness } from './helpers';
import { logHash } from '../../../src/guard/pep/caller';

/**
 * The access log (ZETA Telemetrie): no Telematik-ID, professionOID or
 * client_id in clear anywhere in the log, while each request line still names its client by a
 * stable hash.
 */
describe('access log', () => {
  let h: PepHarness;
  const lines: string[] = [];
  beforeAll(async () => {
    h = await pepHarness();
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    h.ctx.logger = pino({ level: 'debug', base: { service: 'terminus' } }, sink);
  });
  afterAll(() => h.close());

  test('request lines carry a client hash and never the identities', async () => {
    const t = await institution(h, { telematikId: '1-PEP-LOG-4711', professionOid: '1.2.276.0.76.4.53' });
    const { client_id: clientId } = decodePayload(t.accessToken) as { client_id: string };
    const statuses = [
      (await call(h, t, 'GET', '/Slot')).status,
      (await call(h, t, 'GET', '/Slot', { proof: null })).status,
      (await call(h, t, 'DELETE', '/Slot/x')).status,
      (await call(h, t, 'GET', '/Appointment/nope')).status,
      (await call(h, t, 'GET', '/Slot?identifier=1-PEP-LOG-4711')).status,
    ];
    expect(statuses).toEqual([200, 401, 403, 404, 200]);
    const requestLinesNow = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request' && String(l.path).startsWith('/fhir'));
    // The request line is written when the response finishes, which may come after the client has its answer.
    for (let i = 0; i < 200 && requestLinesNow().length < 5; i++) await new Promise((r) => setTimeout(r, 25));
    const requestLines = requestLinesNow();
    expect(requestLines).toHaveLength(5);
    for (const l of requestLines) expect(l.client).toBe(logHash(clientId));
    const all = lines.join('\n');
    expect(all).not.toContain('1-PEP-LOG-4711');
    expect(all).not.toContain('1.2.276.0.76.4.53');
    expect(all).not.toContain(clientId);
  });
});
