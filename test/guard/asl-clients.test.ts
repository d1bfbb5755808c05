import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Appointment, Bundle, Patient, Slot } from '@medplum/fhirtypes';
import { createClient, type ClientSession } from '../../src/client';
import { startSigningProxy } from '../../src/client/proxy/signing-proxy';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { freePort } from '../helpers/swtpm';
import { entryArgs } from '../helpers/entry';

/**
 * Both reference clients send bodies through the additional security layer to a real server on
 * loopback with ASL_MODE required, so nothing of /fhir travels plain: the library's
 * session fetch (createClient) and the `terminus-client` CLI as a child process (`http POST|PUT|PATCH
 * --data FILE --asl`, `book --asl`).
 */
let server: RunningServer;
let origin: string;
let dir: string;
let library: ClientSession;
const PASSWORD = 'correct horse battery staple';
const children = new Set<ChildProcess>();

const cardFile = () => path.join(dir, 'pki', 'card-p256.pem');
const keyFile = () => path.join(dir, 'pki', 'card-p256.key.pem');
const JSON_HEADERS = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };
/** A successful $book: 201 booked, or 202 pending where the schedule needs manual confirmation. */
const BOOKED = [
  [201, 'booked'],
  [202, 'pending'],
];
const cancelPatch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asl-clients-'));
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext({ env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'true', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), REPOSITORY_OWNERS: '', ASL_MODE: 'required' } });
  server = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
  library = await createClient({ server: origin, card: cardFile(), key: keyFile(), home: path.join(dir, 'lib-home'), password: PASSWORD });
}, 120_000);
afterAll(async () => {
  for (const c of children) c.kill();
  library?.close();
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Free slots of the demo data, read through the tunnel. */
async function freeSlots(n: number): Promise<Slot[]> {
  const accept = { headers: { accept: 'application/fhir+json' } };
  const schedule = ((await (await library.fetch(`${origin}/fhir/Schedule?_count=1`, accept)).json()) as Bundle).entry![0].resource!.id;
  const res = await library.fetch(`${origin}/fhir/Slot?schedule=Schedule/${schedule}&status=free&_count=${n}`, accept);
  expect(res.status).toBe(200);
  const slots = ((await res.json()) as Bundle).entry!.map((e) => e.resource as Slot);
  expect(slots.length).toBe(n);
  return slots;
}

test('the library: a plain /fhir request is refused; session fetch through the tunnel creates, books, updates and patches', async () => {
  const plain = await fetch(`${origin}/fhir/Patient`, { method: 'POST', headers: JSON_HEADERS, body: '{"resourceType":"Patient"}' });
  expect([plain.status, ((await plain.json()) as { error: string }).error]).toEqual([403, 'asl_required']);

  const created = await library.fetch(`${origin}/fhir/Patient`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Größe', given: ['Zoë'] }] }) });
  expect(created.status).toBe(201);
  const patient = (await created.json()) as Patient;
  // Discovery (at the login of the first fetch) said required: the session speaks ASL by itself.
  expect(library.guard.usesAsl()).toBe(true);
  expect(patient.name).toEqual([{ family: 'Größe', given: ['Zoë'] }]);

  const [slot] = await freeSlots(1);
  const booking = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: { resourceType: 'Appointment', status: 'proposed', start: slot.start, end: slot.end, serviceType: slot.serviceType, specialty: slot.specialty, slot: [{ reference: `Slot/${slot.id}` }], participant: [{ actor: { reference: `Patient/${patient.id}` }, status: 'accepted' }] } }] };
  const booked = await library.fetch(`${origin}/fhir/Appointment/$book`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(booking) });
  const appointment = (await booked.json()) as Appointment;
  // 202 pending where the demo schedule asks for manual confirmation.
  expect(BOOKED).toContainEqual([booked.status, appointment.status]);
  expect(appointment.slot).toEqual([{ reference: `Slot/${slot.id}` }]);

  const put = await library.fetch(`${origin}/fhir/Appointment/${appointment.id}`, { method: 'PUT', headers: JSON_HEADERS, body: JSON.stringify({ ...appointment, comment: 'über die Bibliothek' }) });
  expect([put.status, ((await put.json()) as Appointment).comment]).toEqual([200, 'über die Bibliothek']);
  const patched = await library.fetch(`${origin}/fhir/Appointment/${appointment.id}`, { method: 'PATCH', headers: JSON_HEADERS, body: JSON.stringify(cancelPatch) });
  expect([patched.status, ((await patched.json()) as Appointment).status]).toEqual([200, 'cancelled']);
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [...entryArgs('src/client/cli.ts'), ...args, '--asl'],
      { env: { ...process.env, NODE_OPTIONS: '', TERMINUS_CLIENT_HOME: path.join(dir, 'cli-home'), TERMINUS_CLIENT_PASSWORD: PASSWORD }, timeout: 120_000 },
      (err, stdout, stderr) => {
        children.delete(child);
        let json: unknown;
        try {
          json = JSON.parse(stdout);
        } catch {
          json = undefined;
        }
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr, json });
      },
    );
    children.add(child);
  });
}

test('the CLI with --asl: http POST /fhir/Patient --data, book --patient-file, http PUT and http PATCH --data all succeed', async () => {
  const [, slot] = await freeSlots(2);
  const file = (name: string, value: unknown) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, JSON.stringify(value));
    return f;
  };

  const posted = await cli(['http', 'POST', '/fhir/Patient', '--data', file('patient.json', { resourceType: 'Patient', active: true, name: [{ family: 'Kommandozeile-Ünal' }] }), '--server', origin, '--card', cardFile(), '--key', keyFile()]);
  expect([posted.code, posted.stderr]).toEqual([0, '']);
  expect(posted.json).toMatchObject({ status: 201, body: { resourceType: 'Patient', name: [{ family: 'Kommandozeile-Ünal' }] } });

  const booked = await cli(['book', '--slot', `Slot/${slot.id}`, '--patient-file', file('booker.json', { resourceType: 'Patient', name: [{ family: 'Buchung-Ärztin' }] })]);
  expect([booked.code, booked.stderr]).toEqual([0, '']);
  const appointment = (booked.json.resourceType === 'Appointment' ? booked.json : booked.json.entry?.find((e: { resource: Appointment }) => e.resource.resourceType === 'Appointment')?.resource) as Appointment;
  expect(appointment).toMatchObject({ resourceType: 'Appointment', status: expect.stringMatching(/^(booked|pending)$/), slot: [{ reference: `Slot/${slot.id}` }] });

  const put = await cli(['http', 'PUT', `/fhir/Appointment/${appointment.id}`, '--data', file('appointment.json', { ...appointment, comment: 'über die Kommandozeile' })]);
  expect([put.code, put.stderr]).toEqual([0, '']);
  expect(put.json).toMatchObject({ status: 200, body: { comment: 'über die Kommandozeile' } });

  const patched = await cli(['http', 'PATCH', `/fhir/Appointment/${appointment.id}`, '--data', file('cancel.json', cancelPatch)]);
  expect([patched.code, patched.stderr]).toEqual([0, '']);
  expect(patched.json).toMatchObject({ status: 200, body: { status: 'cancelled' } });

  // What the CLI wrote is in the store as sent.
  const stored = await library.fetch(`${origin}/fhir/Appointment/${appointment.id}`, { headers: { accept: 'application/fhir+json' } });
  expect((await stored.json()) as Appointment).toMatchObject({ status: 'cancelled', comment: 'über die Kommandozeile' });
});

test('the local signing proxy in front of a server that requires ASL: a plain FHIR client creates, books and patches, its bodies through the tunnel unchanged', async () => {
  const proxy = await startSigningProxy({ session: library, port: 0 });
  try {
    const base = `${proxy.address}/fhir`;
    const created = await fetch(`${base}/Patient`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Öztürk-Łukasz', given: ['Zoë 👩‍⚕️'] }] }) });
    expect(created.status).toBe(201);
    const patient = (await created.json()) as Patient;
    expect(patient.name).toEqual([{ family: 'Öztürk-Łukasz', given: ['Zoë 👩‍⚕️'] }]);
    const [slot] = await freeSlots(1);
    const booking = { resourceType: 'Parameters', parameter: [{ name: 'appt-resource', resource: { resourceType: 'Appointment', status: 'proposed', start: slot.start, end: slot.end, serviceType: slot.serviceType, specialty: slot.specialty, slot: [{ reference: `Slot/${slot.id}` }], participant: [{ actor: { reference: `Patient/${patient.id}` }, status: 'accepted' }] } }] };
    const booked = await fetch(`${base}/Appointment/$book`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(booking) });
    const appointment = (await booked.json()) as Appointment;
    expect(BOOKED).toContainEqual([booked.status, appointment.status]);
    const patched = await fetch(`${base}/Appointment/${appointment.id}`, { method: 'PATCH', headers: { ...JSON_HEADERS, 'content-type': 'application/json-patch+json' }, body: JSON.stringify([{ op: 'replace', path: '/status', value: 'cancelled' }]) });
    expect([patched.status, ((await patched.json()) as Appointment).status]).toEqual([200, 'cancelled']);
    // The proxy itself spoke plain HTTP only to this process: /fhir on the server stays ASL-only.
    expect(library.guard.usesAsl()).toBe(true);
  } finally {
    await proxy.close();
  }
});
