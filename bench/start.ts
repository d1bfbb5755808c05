import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Appointment } from '@medplum/fhirtypes';
import { Pool } from 'pg';
import { createDevPki, issueCard, writeDevPki, type CardCa } from '../src/guard/pki/dev-pki';
import { GuardClient, SoftwareCard, fetchTransport } from '../src/client';
import { loadAverage } from './lib/cpu';
import { startServerProcess } from './lib/server';

const STARTS = 3;
const WARM = 15;
const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';

/**
 * Cold start: a process that answers /readyz must answer its first requests as fast as
 * its later ones. Per store, STARTS fresh processes (demo data); in each the first request of every
 * kind is timed, then WARM more of the same kind; reported: the first minus the median warm one.
 */
export async function benchStart(): Promise<string> {
  const stores: { name: string; env: () => Record<string, string> }[] = [
    { name: 'PGlite (embedded)', env: () => ({ DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-start-')), DATABASE_URL: '', REDIS_URL: '' }) },
  ];
  if (process.env.DATABASE_URL) stores.push({ name: 'PostgreSQL (local)', env: () => ({ DATABASE_URL: FRESH_DATABASE, REDIS_URL: process.env.REDIS_URL ?? '' }) });
  const pkiDir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-start-pki-'));
  const pki = createDevPki();
  writeDevPki(pkiDir, pki);
  const rows: string[] = [];
  try {
    for (const store of stores) {
      const firsts = new Map<string, number[]>();
      const warms = new Map<string, number[]>();
      for (let n = 0; n < STARTS; n++) {
        const env = store.env();
        if (env.DATABASE_URL) await freshDatabase();
        const server = await startServerProcess({ ...env, DEMO_DATA: 'true', CARD_TRUST_ANCHORS: path.join(pkiDir, 'card-ca.pem'), RATE_LIMIT_PER_IP: '100000', RATE_LIMIT_PER_CLIENT: '100000' });
        try {
          for (const [kind, run] of await requestKinds(server.url, pki.ca, issueCard(pki.ca, { telematikId: `1-BENCH-START-FIRST-${n}` }))) {
            const first = await run(0);
            const warm: number[] = [];
            for (let i = 1; i <= WARM; i++) warm.push(await run(i));
            push(firsts, kind, first);
            push(warms, kind, median(warm));
          }
        } finally {
          await server.stop();
          if (env.DATA_DIR) fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
        }
      }
      for (const kind of firsts.keys()) {
        const f = median(firsts.get(kind)!);
        const w = median(warms.get(kind)!);
        rows.push(`| ${store.name} | ${kind} | ${f.toFixed(1)} | ${w.toFixed(1)} | ${(f - w).toFixed(1)} |`);
      }
    }
  } finally {
    fs.rmSync(pkiDir, { recursive: true, force: true });
    if (process.env.DATABASE_URL) {
      const admin = new Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
      await admin.query('DROP DATABASE IF EXISTS terminus_bench_start WITH (FORCE)').catch(() => undefined);
      await admin.end();
    }
  }
  return [
    `Per store ${STARTS} fresh \`terminus serve\` processes (demo calendars, default log level), each timed from its /readyz: the first request of each kind, then ${WARM} more of that kind (median); the table gives the medians over the processes. Machine: ${os.cpus().length} cores, load average ${loadAverage()} at the end.`,
    '',
    '| store | request | first ms | warm ms | first - warm ms |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    'Aim (docs/requirements.md#performance-aims): the first request under 50 ms over a warm one. Before the server listens, start-up loads the validation profiles and the search-parameter registry, opens every table, loads the signing key and rehearses the checks of a throwaway institution card and the request body readers, so /readyz means ready. The login rows use a card the server has not seen in every run, first and warm alike (the chain and OCSP answer of a known card are remembered).',
  ].join('\n');
}

type Kind = [string, (i: number) => Promise<number>];

/** The requests a fresh process meets first: a calendar search, a booking, a token exchange, a guarded search. */
async function requestKinds(url: string, ca: CardCa, card: { certPem: string; keyPem: string }): Promise<Kind[]> {
  const get = async (p: string, headers: Record<string, string> = {}) => {
    const t0 = performance.now();
    const res = await fetch(`${url}${p}`, { headers: { accept: 'application/fhir+json', ...headers } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${p}: ${res.status}`);
    return performance.now() - t0;
  };
  const client = new GuardClient({ server: url, transport: fetchTransport(), retries: 2 });
  const day = (i: number) => new Date(Date.now() + (i + 1) * 86_400_000).toISOString().slice(0, 10);
  let loggedIn = false;
  const search = (i: number) => `/fhir/Slot?status=free&schedule=${encodeURIComponent(scheduleRef)}&start=ge${day(i % 20)}&start=le${day(i % 20)}&_count=10`;
  let scheduleRef = '';
  const slots: { id: string; start: string; end: string; serviceType?: Appointment['serviceType']; specialty?: Appointment['specialty'] }[] = [];
  return [
    [
      'registration and token exchange (a new client with a card not seen before)',
      async (i) => {
        // Each run a new client of a new institution: registration, nonce and exchange every time,
        // and a card the server has not seen (a known card's chain and OCSP answer are remembered,
        // which a first login after start cannot have; comparing with them would count that as cold start).
        const c = i === 0 ? client : new GuardClient({ server: url, transport: fetchTransport(), retries: 2 });
        const fresh = i === 0 ? card : issueCard(ca, { telematikId: `1-BENCH-START-${i}-${process.hrtime.bigint()}` });
        const t0 = performance.now();
        await c.login(new SoftwareCard(fresh.certPem, fresh.keyPem));
        loggedIn = true;
        return performance.now() - t0;
      },
    ],
    [
      'guarded calendar search',
      async (i) => {
        if (!loggedIn) throw new Error('not logged in');
        if (!scheduleRef) {
          // A calendar with slots ahead (demo calendars differ: some take no bookings online).
          const found = (await client.request('GET', `${url}/fhir/Slot?start=ge${day(0)}&_count=1000`)).json as { entry: { resource: { schedule: { reference: string }; status: string } }[] };
          const free = (found.entry ?? []).find((e) => e.resource.status === "free");
          if (!free) throw new Error(`no free slot ahead: ${JSON.stringify(found).slice(0, 300)}`);
          scheduleRef = free.resource.schedule.reference;
        }
        const t0 = performance.now();
        const res = await client.request('GET', `${url}${search(i)}`, { headers: { accept: 'application/fhir+json' } });
        const bundle = res.json as { entry?: { resource: { id: string; start: string; end: string; resourceType: string; serviceType?: Appointment['serviceType']; specialty?: Appointment['specialty'] } }[] };
        if (res.status !== 200) throw new Error(`search ${res.status}: ${res.text.slice(0, 300)}`);
        slots.push(...(bundle.entry ?? []).filter((e) => e.resource.resourceType === 'Slot').map((e) => e.resource));
        return performance.now() - t0;
      },
    ],
    [
      '`$book` (guarded)',
      async () => {
        const slot = slots.shift();
        if (!slot) throw new Error('no free slot found');
        const appointment: Appointment = {
          resourceType: 'Appointment',
          meta: { profile: [`${ISIK}ISiKTermin`] },
          status: 'proposed',
          start: slot.start,
          end: slot.end,
          slot: [{ reference: `Slot/${slot.id}` }],
          serviceType: slot.serviceType,
          specialty: slot.specialty,
          participant: [{ actor: { display: 'Bench Start' }, status: 'accepted' }],
        };
        const parameters = {
          resourceType: 'Parameters',
          parameter: [
            { name: 'appt-resource', resource: appointment },
            { name: 'patient', resource: { resourceType: 'Patient', active: true, name: [{ family: 'Bench', given: ['Start'] }], gender: 'unknown', birthDate: '1970-01-01' } },
          ],
        };
        const t0 = performance.now();
        const res = await client.request('POST', `${url}/fhir/Appointment/$book`, { body: JSON.stringify(parameters), headers: { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' } });
        if (res.status !== 201 && res.status !== 202) throw new Error(`$book ${res.status}: ${res.text.slice(0, 400)}`);
        return performance.now() - t0;
      },
    ],
    ['`GET /fhir/metadata`', () => get('/fhir/metadata')],
  ];
}

/** A database of its own per process start (demo data goes only into an empty store). */
const FRESH_DATABASE = (() => {
  if (!process.env.DATABASE_URL) return '';
  const url = new URL(process.env.DATABASE_URL);
  url.pathname = '/terminus_bench_start';
  return url.toString();
})();

async function freshDatabase(): Promise<void> {
  const admin = new Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
  try {
    await admin.query('DROP DATABASE IF EXISTS terminus_bench_start WITH (FORCE)');
    await admin.query('CREATE DATABASE terminus_bench_start');
  } finally {
    await admin.end();
  }
}

function push(m: Map<string, number[]>, k: string, v: number): void {
  m.set(k, [...(m.get(k) ?? []), v]);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
