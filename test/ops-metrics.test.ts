import fs from 'node:fs';
import path from 'node:path';
import type { Bundle } from '@medplum/fhirtypes';
import { startServer, type RunningServer } from '../src/server';
import { createTestContext } from './helpers/context';
import { freePort } from './helpers/swtpm';

/** `GET /metrics` on METRICS_PORT (docs/requirements.md#practice-page-and-operations) of a running server, after real traffic. */
let server: RunningServer;
let metricsPort: number;

beforeAll(async () => {
  metricsPort = await freePort();
  const ctx = await createTestContext({ env: { METRICS_PORT: String(metricsPort) } });
  server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1' }, ctx);
  const bundle = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'isik-stufe5.json'), 'utf8')) as Bundle;
  const put = await fetch(`${server.url}/fhir`, { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: JSON.stringify({ ...bundle, type: 'transaction', entry: bundle.entry!.map((e) => ({ ...e, request: { method: 'PUT', url: `${e.resource!.resourceType}/${e.resource!.id}` } })) }) });
  expect(put.status).toBe(200);
}, 60_000);
afterAll(() => server?.close());

const scrape = async () => {
  const res = await fetch(server.metricsUrl!);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
};

/** A scrape once the last `n` requests are counted (a request is counted when its answer has gone out). */
async function settled(n: number): Promise<string> {
  const total = (text: string) => text.split('\n').filter((l) => l.startsWith('terminus_http_requests_total{')).reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
  const target = counted + n;
  for (let i = 0; ; i++) {
    const text = await scrape();
    if (total(text) >= target || i > 50) {
      counted = total(text);
      return text;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
let counted = 0;

/** The value of one sample, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = line.slice(name.length, line.lastIndexOf(' '));
    if (want.every((w) => labelText.includes(w))) return Number(line.split(' ').pop());
  }
  return 0;
}

test('the listener answers on 127.0.0.1 and only GET /metrics', async () => {
  expect(server.metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
  expect((await fetch(`http://127.0.0.1:${metricsPort}/`)).status).toBe(404);
});

test('requests by route template and status, with latency histograms; ids and unknown paths fold into fixed labels', async () => {
  const before = await settled(0);
  const search = { method: 'GET', route: '/fhir Slot search-type', status: '200' };
  expect((await fetch(`${server.url}/fhir/Slot?schedule=Schedule/Schedule-Read-Example&status=free`)).status).toBe(200);
  await fetch(`${server.url}/fhir/Slot/Slot-Free-Example`);
  await fetch(`${server.url}/no/such/path/${'x'.repeat(40)}`);
  await fetch(`${server.url}/fhir/Slot/$nonsense-${Date.now()}`);
  const after = await settled(4);
  expect(sample(after, 'terminus_http_requests_total', search) - sample(before, 'terminus_http_requests_total', search)).toBe(1);
  expect(sample(after, 'terminus_http_requests_total', { route: '/fhir Slot read', status: '200' })).toBeGreaterThanOrEqual(1);
  expect(sample(after, 'terminus_http_request_duration_seconds_count', search)).toBeGreaterThanOrEqual(1);
  expect(sample(after, 'terminus_http_requests_total', { route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
  expect(sample(after, 'terminus_http_requests_total', { route: '/fhir Slot $unknown', status: '404' })).toBeGreaterThanOrEqual(1);
  expect(after).not.toContain('xxxxxxxxxxxxxxxx');
  expect(after).not.toContain('$nonsense');
});

test('bookings by outcome, jobs by state, pool, guard refusals by error code, process metrics', async () => {
  const before = await settled(0);
  const book = (slot: string, prefer?: string) =>
    fetch(`${server.url}/fhir/Appointment/$book`, {
      method: 'POST',
      headers: { 'content-type': 'application/fhir+json', ...(prefer ? { prefer } : {}) },
      body: JSON.stringify({ resourceType: 'Appointment', status: 'proposed', serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] }], specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' }] }], start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z', slot: [{ reference: `Slot/${slot}` }], participant: [{ actor: { reference: 'Patient/Patient-Read-Example' }, status: 'accepted' }] }),
    });
  expect((await book('Slot-Free-By-Schedule-Example')).status).toBe(201);
  expect((await book('Slot-Free-By-Schedule-Example')).status).toBe(409);
  expect((await book('Slot-Free-By-Schedule-Example', 'respond-async')).status).toBe(202);
  const token = await fetch(`${server.url}/svc/v1/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=nonsense' });
  const refusal = ((await token.json()) as { error: string }).error;
  const after = await settled(4);
  const delta = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
  expect(delta('terminus_bookings_total', { outcome: 'booked' })).toBe(1);
  expect(delta('terminus_bookings_total', { outcome: 'conflict' })).toBe(1);
  expect(delta('terminus_bookings_total', { outcome: 'accepted-async' })).toBe(1);
  expect(delta('terminus_guard_decisions_total', { decision: 'refused', error: refusal })).toBe(1);
  expect(after).toMatch(/^terminus_jobs\{state="(queued|running|completed)"\} [1-9]/m);
  expect(after).toMatch(/^terminus_process_resident_memory_bytes \d+/m);
  expect(after).toContain('terminus_subscription_backlog_events 0');
  if (server.ctx.db.kind === 'pg') expect(sample(after, 'terminus_db_pool_connections', { state: 'total' })).toBeGreaterThan(0);
});
