import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { MedplumClient } from '../../src/server-lib/medplum';
import { composeParts } from '../../src/app';
import { createClient, type ClientSession } from '../../src/client';
import { bookParameters } from '../../src/client/book-request';
import { PROXY_ERROR_HEADER, startSigningProxy, type SigningProxy } from '../../src/client/proxy/signing-proxy';
import { importResources, readResourceFile } from '../../src/fhir';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { projectPath } from '../../src/server-lib/paths';
import { createTestContext } from '../helpers/context';
import { entryArgs } from '../helpers/entry';
import { freePort } from '../helpers/swtpm';

// The local signing proxy: FHIR clients that know nothing of DPoP (fhir-kit-client in a process of
// its own, Medplum's MedplumClient, curl over the unix socket) search, book and cancel through it.

const run = promisify(execFile);
let dir: string;
let server: RunningServer;
let origin: string;
let session: ClientSession;
let overPort: SigningProxy;
let overSocket: SigningProxy;
let socket: string;
let ctx: Awaited<ReturnType<typeof createTestContext>> | undefined;
const PATIENT = 'Patient/Patient-Read-Example';

/** Free slots of their own for each client (the fixture's few are booked by other tests). */
function slotsFor(fixture: { entry: { resource: { resourceType: string; id?: string } }[] }): { resource: Record<string, unknown> }[] {
  const template = fixture.entry.map((e) => e.resource).find((r) => r.resourceType === 'Slot' && r.id === 'Slot-Free-Example') as Record<string, unknown>;
  return [1, 2, 3, 4, 5, 6].map((n) => ({ resource: { ...template, id: `Proxy-Slot-${n}`, start: `2027-02-0${n}T09:00:00Z`, end: `2027-02-0${n}T09:30:00Z` } }));
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'signing-proxy-'));
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  ctx = await createTestContext({ env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'false', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem') } });
  const fixture = readResourceFile(projectPath('fixtures', 'isik-stufe5.json')) as unknown as { resourceType: 'Bundle'; type: string; entry: { resource: { resourceType: string; id?: string } }[] };
  await importResources(composeParts(ctx).fhir, { ...fixture, entry: [...fixture.entry, ...slotsFor(fixture)] } as never);
  server = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
  session = await createClient({ server: origin, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'home'), password: 'proxy test passphrase' });
  overPort = await startSigningProxy({ session, port: 0 });
  socket = path.join(dir, 'run', 'serve.sock');
  overSocket = await startSigningProxy({ session, socket });
}, 120_000);
afterAll(async () => {
  for (const child of serving) child.kill('SIGKILL');
  await overPort?.close();
  await overSocket?.close();
  session?.close();
  // A start that failed half-way leaves the store open: closed here, or Jest never exits.
  if (server) await server.close();
  else await ctx?.db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** `terminus-client serve` processes of the tests, killed in afterAll should a test fail before its own stop. */
const serving = new Set<ChildProcessWithoutNullStreams>();

/**
 * `terminus-client serve ARGS` as its own process (logged in with the brainpool development card),
 * once it has printed where it listens; `stop` sends SIGTERM and returns the exit code.
 */
async function startServe(args: string[], env: Record<string, string>): Promise<{ listening: Record<string, string>; stop(): Promise<number | null> }> {
  const child = spawn(process.execPath, [...entryArgs('src/client/cli.ts'), 'serve', '--server', origin, '--card', path.join(dir, 'pki', 'card-brainpool.pem'), '--key', path.join(dir, 'pki', 'card-brainpool.key.pem'), ...args], {
    cwd: projectPath(),
    // Named, not copied: the CLI needs no store variable (and this file reads none, test/store-env.js).
    env: { PATH: process.env.PATH ?? '', HOME: os.homedir(), TERMINUS_CLIENT_PASSWORD: 'serve test passphrase', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as unknown as ChildProcessWithoutNullStreams;
  serving.add(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  void exited.then(() => serving.delete(child));
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  try {
    const listening = await new Promise<Record<string, string>>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        try {
          resolve(JSON.parse(out));
        } catch {
          // not all of it yet
        }
      });
      void exited.then((code) => reject(new Error(`serve exited ${code}: ${err}`)));
    });
    return {
      listening,
      stop: async () => {
        child.kill('SIGTERM');
        return exited;
      },
    };
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
}

const slot = (n: number) => ({ id: `Proxy-Slot-${n}`, start: `2027-02-0${n}T09:00:00Z`, end: `2027-02-0${n}T09:30:00Z`, serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177' }] }] });

test('fhir-kit-client (its own process) searches, books and cancels through the proxy', async () => {
  const { stdout } = await run(process.execPath, [path.join(__dirname, '..', 'helpers', 'fhir-kit-run.mjs'), `${overPort.address}/fhir`, 'Proxy-Slot-1', JSON.stringify(bookParameters(slot(1), PATIENT))], { cwd: projectPath() });
  const r = JSON.parse(stdout);
  expect(r).toMatchObject({ found: 1, booked: { resourceType: 'Appointment', slot: [{ reference: 'Slot/Proxy-Slot-1' }] }, cancelled: { resourceType: 'Appointment', status: 'cancelled' } });
});

test("Medplum's MedplumClient pointed at the proxy searches, books ($book) and cancels (JSON Patch)", async () => {
  const medplum = new MedplumClient({ baseUrl: `${overPort.address}/`, fhirUrlPath: 'fhir', fetch: (url: string, init: RequestInit) => fetch(url, init), cacheTime: 0 });
  const found = await medplum.searchResources('Slot', { schedule: 'Schedule/Schedule-Read-Example', status: 'free', _id: 'Proxy-Slot-2' });
  expect(found.map((s) => s.id)).toEqual(['Proxy-Slot-2']);
  const booked = (await medplum.post(medplum.fhirUrl('Appointment', '$book'), bookParameters(slot(2), PATIENT))) as { resourceType: string; id: string };
  expect(booked.resourceType).toBe('Appointment');
  const cancelled = await medplum.patchResource('Appointment', booked.id, [{ op: 'replace', path: '/status', value: 'cancelled' }]);
  expect(cancelled.status).toBe('cancelled');
});

test('curl over the unix socket (mode 600): health, search and $book', async () => {
  expect(fs.statSync(socket).mode & 0o777).toBe(0o600);
  const curl = async (...args: string[]) => (await run('curl', ['-sS', '--unix-socket', socket, ...args])).stdout;
  const health = JSON.parse(await curl('http://localhost/api/health'));
  expect(health).toMatchObject({ status: 'ok', server: origin, logged_in: true });
  const bundle = JSON.parse(await curl('http://localhost/fhir/Slot?schedule=Schedule/Schedule-Read-Example&status=free&_id=Proxy-Slot-3'));
  expect(bundle.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['Proxy-Slot-3']);
  const booked = JSON.parse(await curl('-X', 'POST', '-H', 'content-type: application/fhir+json', '--data', JSON.stringify(bookParameters(slot(3), PATIENT)), 'http://localhost/fhir/Appointment/$book'));
  expect(booked).toMatchObject({ resourceType: 'Appointment', slot: [{ reference: 'Slot/Proxy-Slot-3' }] });
});

test('the socket is mode 600 from the moment it listens, not only after a later chmod', async () => {
  // Its mode when the server emits 'listening' (right after bind(2), before startSigningProxy
  // could change anything): another local user who connects in that moment would reach the session.
  const create = http.createServer;
  let modeAtListening: number | undefined;
  const spy = jest.spyOn(http, 'createServer').mockImplementation(((...args: Parameters<typeof http.createServer>) => {
    const s = create(...args);
    s.prependListener('listening', () => {
      modeAtListening = fs.statSync(s.address() as string).mode & 0o777;
    });
    return s;
  }) as typeof http.createServer);
  const before = path.join(dir, 'umask-before');
  fs.writeFileSync(before, '');
  let proxy: SigningProxy | undefined;
  try {
    proxy = await startSigningProxy({ session, socket: path.join(dir, 'run-early', 'early.sock') });
  } finally {
    spy.mockRestore();
    await proxy?.close();
  }
  expect(modeAtListening).toBe(0o600);
  // The umask is the process's again: files made from here on get their usual mode.
  const after = path.join(dir, 'umask-after');
  fs.writeFileSync(after, '');
  expect(fs.statSync(after).mode & 0o777).toBe(fs.statSync(before).mode & 0o777);
});

test("the server's answers pass through verbatim (a 404 OperationOutcome, its headers); the proxy's own carry terminus-proxy-error", async () => {
  const direct = await session.fetch(`${origin}/fhir/Slot/does-not-exist`, { headers: { accept: 'application/fhir+json' } });
  const proxied = await fetch(`${overPort.address}/fhir/Slot/does-not-exist`, { headers: { accept: 'application/fhir+json' } });
  expect([proxied.status, proxied.headers.get(PROXY_ERROR_HEADER), proxied.headers.get('content-type')]).toEqual([direct.status, null, direct.headers.get('content-type')]);
  const [a, b] = [await direct.json(), await proxied.json()];
  expect(b).toEqual(a);
  const other = await fetch(`${overPort.address}/svc/v1/token`, { method: 'POST' });
  expect([other.status, other.headers.get(PROXY_ERROR_HEADER), ((await other.json()) as { error: string }).error]).toEqual([404, 'not_proxied', 'not_proxied']);
  const bigFile = path.join(dir, 'big.json');
  fs.writeFileSync(bigFile, 'x'.repeat(17 * 1024 * 1024));
  const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-D', '-', '-X', 'POST', '-H', 'content-type: application/fhir+json', '--data-binary', `@${bigFile}`, `${overPort.address}/fhir`]).catch((e: { stdout: string }) => e);
  expect(stdout).toMatch(/^HTTP\/1\.1 413/m);
  expect(stdout).toMatch(new RegExp(`^${PROXY_ERROR_HEADER}: body_too_large`, 'mi'));
});

test('a request the client sends with its own Authorization gets the session\'s instead (the proxy signs; nothing a local caller sends is forwarded as a credential)', async () => {
  const res = await fetch(`${overPort.address}/fhir/Slot?_id=Proxy-Slot-4`, { headers: { authorization: 'Bearer forged', dpop: 'forged', cookie: 'a=b' } });
  expect(res.status).toBe(200);
});

test('the proxy refreshes the token ahead of its expiry, before any request needs it', async () => {
  const warm = await startSigningProxy({ session, port: 0, keepWarmMs: 50 });
  try {
    await session.accessToken();
    const before = session.guard.tokens!;
    // As if the token had 20 s left: the next look refreshes it (a refresh, not a new exchange).
    session.guard.tokens = { ...before, expiresAt: Math.floor(Date.now() / 1000) + 20 };
    for (let i = 0; i < 200 && session.guard.tokens.accessToken === before.accessToken; i++) await new Promise((r) => setTimeout(r, 50));
    expect(session.guard.tokens.accessToken).not.toBe(before.accessToken);
    expect(session.guard.tokens.expiresAt).toBeGreaterThan(Math.floor(Date.now() / 1000) + 60);
  } finally {
    await warm.close();
  }
});

test('after a logout the proxy answers its own 401 logged_out; health says not logged in', async () => {
  await session.logout();
  const res = await fetch(`${overPort.address}/fhir/Slot?_id=Proxy-Slot-4`);
  expect([res.status, res.headers.get(PROXY_ERROR_HEADER), ((await res.json()) as { error: string }).error]).toEqual([401, 'logged_out', 'logged_out']);
  const health = (await (await fetch(`${overPort.address}/api/health`)).json()) as Record<string, unknown>;
  expect(health).toMatchObject({ status: 'not_logged_in', logged_in: false, logged_out: true });
});

test('terminus-client serve: logs in, listens on its socket (mode 600) until SIGTERM, then removes it', async () => {
  const sock = path.join(dir, 'serve-run', 'proxy.sock');
  const serve = await startServe(['--socket', sock], { TERMINUS_CLIENT_HOME: path.join(dir, 'serve-home') });
  try {
    expect(serve.listening).toEqual({ listening: `unix:${sock}`, server: origin });
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    const { stdout } = await run('curl', ['-sS', '--unix-socket', sock, 'http://localhost/api/health']);
    expect(JSON.parse(stdout)).toMatchObject({ status: 'ok', logged_in: true });
  } finally {
    expect(await serve.stop()).toBe(0);
  }
  expect(fs.existsSync(sock)).toBe(false);
});

test('terminus-client serve --port N: 127.0.0.1:N searches and books ($book) until SIGTERM', async () => {
  const port = await freePort();
  const serve = await startServe(['--port', String(port)], { TERMINUS_CLIENT_HOME: path.join(dir, 'serve-port-home') });
  const base = `http://127.0.0.1:${port}`;
  try {
    expect(serve.listening).toEqual({ listening: base, server: origin });
    const bundle = (await (await fetch(`${base}/fhir/Slot?schedule=Schedule/Schedule-Read-Example&status=free&_id=Proxy-Slot-5`, { headers: { accept: 'application/fhir+json' } })).json()) as { entry: { resource: { id: string } }[] };
    expect(bundle.entry.map((e) => e.resource.id)).toEqual(['Proxy-Slot-5']);
    const booked = await fetch(`${base}/fhir/Appointment/$book`, { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: JSON.stringify(bookParameters(slot(5), PATIENT)) });
    expect([booked.ok, booked.headers.get(PROXY_ERROR_HEADER)]).toEqual([true, null]);
    expect(await booked.json()).toMatchObject({ resourceType: 'Appointment', slot: [{ reference: 'Slot/Proxy-Slot-5' }] });
  } finally {
    expect(await serve.stop()).toBe(0);
  }
  // Stopped means stopped: nothing listens on the port any more.
  await expect(fetch(`${base}/api/health`)).rejects.toThrow();
});

test('terminus-client serve without --socket or --port: the socket ~/.terminus-client/serve.sock (mode 600), which curl books through', async () => {
  // HOME of its own and no TERMINUS_CLIENT_HOME: the documented default, under the home directory.
  const home = path.join(dir, 'serve-default-user');
  fs.mkdirSync(home);
  const sock = path.join(home, '.terminus-client', 'serve.sock');
  const serve = await startServe([], { HOME: home });
  try {
    expect(serve.listening).toEqual({ listening: `unix:${sock}`, server: origin });
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    const curl = async (...args: string[]) => (await run('curl', ['-sS', '--unix-socket', sock, ...args])).stdout;
    const booked = JSON.parse(await curl('-X', 'POST', '-H', 'content-type: application/fhir+json', '--data', JSON.stringify(bookParameters(slot(6), PATIENT)), 'http://localhost/fhir/Appointment/$book'));
    expect(booked).toMatchObject({ resourceType: 'Appointment', slot: [{ reference: 'Slot/Proxy-Slot-6' }] });
  } finally {
    expect(await serve.stop()).toBe(0);
  }
  expect(fs.existsSync(sock)).toBe(false);
});

test('a server that does not answer: the proxy answers its own 502 server_unreachable', async () => {
  const gone = `http://127.0.0.1:${await freePort()}`;
  const lost = await createClient({ server: gone, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'gone-home'), password: 'proxy test passphrase', retries: 0 });
  const proxy = await startSigningProxy({ session: lost, port: 0 });
  try {
    const res = await fetch(`${proxy.address}/fhir/Slot?_id=x`);
    expect([res.status, res.headers.get(PROXY_ERROR_HEADER), ((await res.json()) as { error: string }).error]).toEqual([502, 'server_unreachable', 'server_unreachable']);
  } finally {
    await proxy.close();
    lost.close();
  }
});
