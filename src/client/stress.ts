import { bookParameters, withScheduleCodes, type BookableSlot } from './book-request';
import { GuardClientError } from './guard-client';
import type { ClientSession } from './session';

export { bookParameters } from './book-request';

export const SCENARIOS = ['login-storm', 'refresh-storm', 'search', 'book'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface StressReport {
  scenario: Scenario;
  concurrency: number;
  requests: number;
  duration_s: number;
  rps: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  /** Failed requests by HTTP status (0: no answer). */
  errors: Record<string, number>;
}

type Step = () => Promise<number>;

/**
 * Load from this client (as gematik zeta-cli's `stress`): `concurrency` workers in a closed loop
 * until `durationSec` or `maxRequests`; each worker has its own guard session where the scenario
 * needs one (refresh tokens rotate per session).
 */
export async function runStress(s: ClientSession, scenario: Scenario, o: { durationSec: number; concurrency: number; maxRequests?: number; slotSearch?: string }): Promise<StressReport> {
  await s.accessToken();
  const slotSearch = o.slotSearch ?? (await freeSlotQuery(s));
  const steps = await Promise.all(Array.from({ length: o.concurrency }, () => stepFor(s, scenario, { slotSearch })));
  const slots = scenario === 'book' ? await freeSlots(s, slotSearch) : [];
  const patient = scenario === 'book' ? await createPatient(s) : '';
  const latencies: number[] = [];
  const errors: Record<string, number> = {};
  let issued = 0;
  const started = performance.now();
  const deadline = started + o.durationSec * 1000;
  const max = o.maxRequests ?? Number.POSITIVE_INFINITY;
  await Promise.all(
    steps.map(async (step) => {
      while (performance.now() < deadline && issued < max) {
        issued++;
        const slot = scenario === 'book' ? slots.pop() : undefined;
        if (scenario === 'book' && !slot) break;
        const t0 = performance.now();
        let status: number;
        try {
          status = slot ? await book(s, slot, patient) : await step();
        } catch (err) {
          status = err instanceof GuardClientError ? err.status : 0;
        }
        latencies.push(performance.now() - t0);
        if (status >= 400 || status === 0) errors[String(status)] = (errors[String(status)] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const sorted = latencies.sort((a, b) => a - b);
  const pct = (p: number) => Number((sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0).toFixed(1));
  return {
    scenario,
    concurrency: o.concurrency,
    requests: latencies.length,
    duration_s: Number(seconds.toFixed(2)),
    rps: Number((latencies.length / seconds).toFixed(1)),
    p50_ms: pct(50),
    p95_ms: pct(95),
    p99_ms: pct(99),
    errors,
  };
}

async function stepFor(s: ClientSession, scenario: Scenario, o: { slotSearch?: string }): Promise<Step> {
  if (scenario === 'login-storm') {
    const { login } = await s.parallelSession();
    return async () => {
      await login();
      return 200;
    };
  }
  if (scenario === 'refresh-storm') {
    const { guard, login } = await s.parallelSession();
    await login();
    return async () => {
      await guard.refresh();
      return 200;
    };
  }
  const url = `${s.origin}/fhir/Slot?${(o.slotSearch ?? '').replace(/_count=\d+/, '_count=20')}`;
  return async () => {
    const res = await s.fetch(url, { headers: { accept: 'application/fhir+json' } });
    await res.arrayBuffer();
    return res.status;
  };
}

/** ISiK allows a Slot status search only with its schedule: the free slots of the first Schedule. */
async function freeSlotQuery(s: ClientSession): Promise<string> {
  const res = await s.fetch(`${s.origin}/fhir/Schedule?_count=1`, { headers: { accept: 'application/fhir+json' } });
  const bundle = (await res.json()) as { entry?: { resource: { id: string } }[] };
  const id = bundle.entry?.[0]?.resource.id;
  if (!id) throw new Error('the repository has no Schedule to take free slots from');
  return `schedule=Schedule/${id}&status=free&_count=200`;
}

/** The slots to book, each with the codes its Schedule lends it (one read per Schedule). */
async function freeSlots(s: ClientSession, query: string): Promise<BookableSlot[]> {
  const res = await s.fetch(`${s.origin}/fhir/Slot?${query}`, { headers: { accept: 'application/fhir+json' } });
  const bundle = (await res.json()) as { entry?: { resource: BookableSlot }[] };
  const schedules = new Map<string, Promise<Pick<BookableSlot, 'serviceType' | 'specialty'>>>();
  const readSchedule = (reference: string) => {
    if (!schedules.has(reference)) schedules.set(reference, s.fetch(`${s.origin}/fhir/${reference}`, { headers: { accept: 'application/fhir+json' } }).then((r) => r.json() as Promise<Pick<BookableSlot, 'serviceType' | 'specialty'>>));
    return schedules.get(reference)!;
  };
  const slots = await Promise.all((bundle.entry ?? []).map((e) => withScheduleCodes(e.resource, readSchedule)));
  return slots.reverse();
}

async function createPatient(s: ClientSession): Promise<string> {
  const res = await s.fetch(`${s.origin}/fhir/Patient`, {
    method: 'POST',
    headers: { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' },
    body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Stress', given: ['Test'] }], gender: 'unknown', birthDate: '1970-01-01' }),
  });
  const p = (await res.json()) as { id?: string };
  if (!p.id) throw new Error(`creating the stress patient failed: ${res.status}`);
  return `Patient/${p.id}`;
}

async function book(s: ClientSession, slot: BookableSlot, patient: string): Promise<number> {
  const res = await s.fetch(`${s.origin}/fhir/Appointment/$book`, {
    method: 'POST',
    headers: { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' },
    body: JSON.stringify(bookParameters(slot, patient)),
  });
  await res.arrayBuffer();
  return res.status;
}
