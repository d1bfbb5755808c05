import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { composeParts } from '../../src/app';
import { KeyStore } from '../../src/client';
import { importResources, readResourceFile } from '../../src/fhir';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { projectPath } from '../../src/server-lib/paths';
import { runCli, type CliRun } from '../helpers/cli-in-process';
import { createTestContext } from '../helpers/context';
import { freePort } from '../helpers/swtpm';

/**
 * The reference client's CLI against a repository it did not set up: no demo data, only the ISiK
 * Stufe 5 fixture loaded by `terminus import`'s code (its calendars carry what the ISiK profiles
 * require and little more). The CLI runs in process through `main`, with its own output and a
 * terminal or not; test/client/cli.test.ts runs it as a child process against the demo store.
 */
let server: RunningServer;
let origin: string;
let dir: string;
let home: string;
const PASSWORD = 'fixture store passphrase';
const OWNER = '1-2-DEV-PRAXIS-P256';

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-fixture-'));
  home = path.join(dir, 'home');
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext({ env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'false', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), REPOSITORY_OWNERS: OWNER } });
  await importResources(composeParts(ctx).fhir, readResourceFile(projectPath('fixtures', 'isik-stufe5.json')));
  server = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
}, 120_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function cli(args: string[], o: { tty?: boolean; home?: string } = {}): Promise<CliRun> {
  return runCli(args, { tty: o.tty, env: { TERMINUS_CLIENT_HOME: o.home ?? home, TERMINUS_CLIENT_PASSWORD: PASSWORD } });
}

const card = () => ['--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem')];
const PATIENT = 'Patient/Patient-Read-Example';

test('login, then http POST /fhir --data FILE (the import hint) stores a transaction Bundle: a Slot without serviceType', async () => {
  const login = await cli(['login', '--server', origin, ...card()]);
  expect(login.stderr).toBe('');
  expect(login.code).toBe(0);
  expect(login.json.scope.split(' ')).toContain('system/*.cruds');
  // ISiKTerminblock asks for schedule, status, start and end; serviceType and specialty are optional.
  const slot = { resourceType: 'Slot', id: 'Slot-Without-ServiceType', schedule: { reference: 'Schedule/Schedule-Read-Example' }, status: 'free', start: '2027-02-01T10:00:00Z', end: '2027-02-01T10:30:00Z' };
  fs.writeFileSync(path.join(dir, 'slot-bundle.json'), JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: slot, request: { method: 'PUT', url: `Slot/${slot.id}` } }] }));
  const post = await cli(['http', 'POST', '/fhir', '--data', path.join(dir, 'slot-bundle.json')]);
  expect(post.stderr).toBe('');
  expect(post.code).toBe(0);
  expect(post.json).toMatchObject({ status: 200, body: { resourceType: 'Bundle', type: 'transaction-response', entry: [{ response: { status: expect.stringMatching(/^20[01]/) } }] } });
  const stored = await cli(['get', '/fhir/Slot/Slot-Without-ServiceType']);
  expect(stored.json).toMatchObject({ resourceType: 'Slot', id: slot.id, status: 'free' });
  expect(stored.json.serviceType).toBeUndefined();
});

test('search, book, get and cancel on the fixture alone', async () => {
  const search = await cli(['search', 'Slot', 'schedule=Schedule/Schedule-Read-Example', 'status=free']);
  expect(search.code).toBe(0);
  const ids = search.json.entry.map((e: any) => e.resource.id);
  expect(ids).toEqual(expect.arrayContaining(['Slot-Free-Example', 'Slot-Free-By-Schedule-Example']));
  const book = await cli(['book', '--slot', 'Slot/Slot-Free-Example', '--patient', PATIENT]);
  expect(book.stderr).toBe('');
  expect(book.code).toBe(0);
  expect(book.json).toMatchObject({ resourceType: 'Appointment', status: expect.stringMatching(/^(booked|pending)$/), slot: [{ reference: 'Slot/Slot-Free-Example' }] });
  const get = await cli(['get', `Appointment/${book.json.id}`]);
  expect(get.json).toMatchObject({ id: book.json.id, participant: [{ actor: { reference: PATIENT } }] });
  const cancel = await cli(['cancel', `Appointment/${book.json.id}`]);
  expect(cancel.code).toBe(0);
  expect(cancel.json.status).toBe('cancelled');
});

test('book --slot Slot/X --patient Patient/Y on a Slot without serviceType: serviceType and specialty from its Schedule', async () => {
  const book = await cli(['book', '--slot', 'Slot/Slot-Without-ServiceType', '--patient', PATIENT]);
  expect(book.stderr).toBe('');
  expect(book.code).toBe(0);
  expect(book.json).toMatchObject({
    resourceType: 'Appointment',
    start: '2027-02-01T10:00:00Z',
    serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] }],
    specialty: [{ coding: [{ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' }] }],
  });
});

test('at a terminal: search and get show ids and the essentials; --json forces JSON', async () => {
  const search = await cli(['search', 'Slot', 'schedule=Schedule/Schedule-Read-Example', 'status=free'], { tty: true });
  expect(search.code).toBe(0);
  const lines = search.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^\d+ Slot entries( of \d+)?$/);
  expect(lines).toContain('  Slot/Slot-Free-By-Schedule-Example  2027-01-31 11:05-11:55Z  free  Schedule/Schedule-Read-Example  Neurology');
  // The id on the line is what `book --slot` takes.
  const booked = await cli(['book', '--slot', 'Slot/Slot-Free-By-Schedule-Example', '--patient', PATIENT], { tty: true });
  expect(booked.code).toBe(0);
  const id = /^booked: Appointment\/([\w.-]+)  (booked|pending)  2027-01-31 11:05-11:55Z  Patient\/Patient-Read-Example  Neurology$/.exec(booked.stdout.trimEnd())?.[1];
  expect(id).toBeDefined();
  const get = await cli(['get', `Appointment/${id}`], { tty: true });
  expect(get.stdout).toMatch(new RegExp(`^Appointment/${id}  (booked|pending)  2027-01-31 11:05-11:55Z  Patient/Patient-Read-Example  Neurology\\n$`));
  const schedule = await cli(['get', 'Schedule/Schedule-Read-Example'], { tty: true });
  expect(schedule.stdout).toMatch(/^Schedule\/Schedule-Read-Example  active  .*Neurologische Sprechstunde  Practitioner\/Practitioner-Read-Example \(Dr\. Walter Musterarzt\)\n$/);
  const json = await cli(['get', `Appointment/${id}`, '--json'], { tty: true });
  expect(json.json).toMatchObject({ resourceType: 'Appointment', id });
  const cancel = await cli(['cancel', `Appointment/${id}`], { tty: true });
  expect(cancel.stdout).toMatch(new RegExp(`^Appointment/${id}  cancelled  `));
});

test('after logout a resource command asks for login (exit 2) and does not use the remembered card; login ends it', async () => {
  const sessions = async () => Number((await server.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM guard_session')).rows[0].n);
  expect((await cli(['logout'])).code).toBe(0);
  const before = await sessions();
  const get = await cli(['get', 'Schedule/Schedule-Read-Example']);
  expect(get.code).toBe(2);
  expect(get.stderr).toBe(`terminus-client: not logged in to ${origin} (logged out): run terminus-client login\n`);
  const withCard = await cli(['search', 'Slot', ...card()]);
  expect(withCard.code).toBe(2);
  expect(await sessions()).toBe(before);
  expect((await cli(['status'])).json).toMatchObject({ logged_in: false, logged_out: true });
  const login = await cli(['login']);
  expect(login.code).toBe(0);
  expect(await sessions()).toBe(before + 1);
  expect((await cli(['get', 'Schedule/Schedule-Read-Example'])).code).toBe(0);
});

test('login through another origin than PUBLIC_URL (localhost for 127.0.0.1): the 409 comes with the origin to use', async () => {
  const own = path.join(dir, 'origin-home');
  // Card paths relative to the working directory are remembered as absolute ones (a later command may run elsewhere).
  const relative = card().map((a) => (a.startsWith('--') ? a : path.relative(process.cwd(), a)));
  expect((await cli(['login', '--server', origin, ...relative], { home: own })).code).toBe(0);
  const store = await KeyStore.open({ home: own, password: PASSWORD });
  expect(store.server(origin)).toMatchObject({ card: { backend: 'pem', cardFile: card()[1], keyFile: card()[3] } });
  store.close();
  const other = origin.replace('127.0.0.1', 'localhost');
  const r = await cli(['login', '--server', other, ...card()], { home: own });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('the server answered 409');
  expect(r.stderr).toContain(`hint: the server expects requests for the origin ${origin} (its PUBLIC_URL): pass --server ${origin}; this key store's client is registered there already\n`);
});

test('login --p12 (legacy and AES files): the card from PKCS#12, remembered with the server; a wrong password is exit 2', async () => {
  const pki = path.join(dir, 'pki');
  for (const legacy of [false, true]) {
    const p12 = path.join(dir, `card-bp256${legacy ? '-legacy' : ''}.p12`);
    execFileSync('openssl', ['pkcs12', '-export', '-in', path.join(pki, 'card-brainpool.pem'), '-inkey', path.join(pki, 'card-brainpool.key.pem'), '-out', p12, '-passout', 'pass:00', ...(legacy ? ['-legacy'] : [])], { stdio: 'ignore' });
    const own = path.join(dir, `p12-home-${legacy}`);
    process.env.TERMINUS_CLIENT_P12_PASSWORD = 'wrong';
    try {
      const refused = await cli(['login', '--server', origin, '--p12', p12], { home: own });
      expect([refused.code, refused.stderr]).toEqual([2, expect.stringContaining(`the PKCS#12 file ${p12}: wrong password (TERMINUS_CLIENT_P12_PASSWORD)`)]);
      process.env.TERMINUS_CLIENT_P12_PASSWORD = '00';
      const login = await cli(['login', '--server', origin, '--p12', p12], { home: own });
      expect([login.code, login.stderr]).toEqual([0, '']);
      const store = await KeyStore.open({ home: own, password: PASSWORD });
      expect(store.server(origin)).toMatchObject({ card: { backend: 'p12', p12File: p12 } });
      expect(JSON.stringify(store.data)).not.toContain('"00"');
      store.close();
      // A later command logs in again by itself with the remembered file (after a logout ends the session it must not).
      const search = await cli(['search', 'Slot', '_count=1'], { home: own });
      expect(search.code).toBe(0);
    } finally {
      delete process.env.TERMINUS_CLIENT_P12_PASSWORD;
    }
  }
});
