import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Client as FhirKitClient } from 'fhir-kit-client';
import { createClient, KeyStore } from '../../src/client';
import { createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { freePort } from '../helpers/swtpm';
import { entryArgs } from '../helpers/entry';

/**
 * The reference client's CLI (docs/requirements.md#reference-client-and-sdk) as a child process
 * against a real server on loopback, through a scripted proxy that can answer 429/503 or 404 in the
 * server's place.
 */
let server: RunningServer;
let proxy: http.Server;
let origin: string;
let dir: string;
let home: string;
const PASSWORD = 'correct horse battery staple';
/** Scripted answers: the next `count` requests whose path matches get `status` instead of the server's. */
const script: { match: RegExp; status: number; count: number; retryAfter?: string }[] = [];
/** Paths the proxy forwarded, in order. */
const seen: string[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
  home = path.join(dir, 'home');
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext({ env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'true', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), REPOSITORY_OWNERS: '', ASL_MODE: 'supported' } });
  server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1' }, ctx);
  const upstream = new URL(server.url);
  proxy = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    const s = script.find((x) => x.count > 0 && x.match.test(req.url ?? ''));
    if (s) {
      s.count--;
      req.resume();
      res.writeHead(s.status, { 'content-type': 'application/json', ...(s.retryAfter ? { 'retry-after': s.retryAfter } : {}) });
      res.end(JSON.stringify({ error: s.status === 429 ? 'rate_limit_exceeded' : 'temporarily_unavailable', error_description: 'scripted by the test' }));
      return;
    }
    const fwd = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    fwd.on('error', () => res.destroy());
    req.pipe(fwd);
  });
  await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
}, 120_000);
afterAll(async () => {
  await new Promise((r) => proxy?.close(r));
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
  ms: number;
}

function cli(args: string[], o: { password?: string; home?: string } = {}): Promise<Run> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...entryArgs('src/client/cli.ts'), ...args],
      { env: { ...process.env, NODE_OPTIONS: '', TERMINUS_CLIENT_HOME: o.home ?? home, TERMINUS_CLIENT_PASSWORD: o.password ?? PASSWORD }, timeout: 120_000 },
      (err, stdout, stderr) => {
        let json: unknown;
        try {
          json = JSON.parse(stdout);
        } catch {
          json = undefined;
        }
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr, json, ms: Date.now() - t0 });
      },
    );
  });
}

const card = () => ['--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem')];
let clientId: string;

test('login: registration and token exchange; the key store is one encrypted file, mode 600 in a mode-700 folder', async () => {
  const r = await cli(['login', '--server', origin, ...card()]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.json).toMatchObject({ client_id: expect.any(String), attestation: 'software' });
  expect(r.json.scope).toMatch(/system\/Slot\.rs/);
  clientId = r.json.client_id;
  expect(fs.statSync(home).mode & 0o777).toBe(0o700);
  const file = path.join(home, 'keystore.json');
  expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  const stored = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  expect(Object.keys(stored).sort()).toEqual(['cipher', 'data', 'format', 'iv', 'kdf', 'tag', 'version']);
  const { data, ...envelope } = stored;
  expect(JSON.stringify(envelope)).not.toMatch(/BEGIN|PRIVATE|eyJ|refresh|"d":/);
  // The payload is ciphertext: none of the plaintext's markers survive in its bytes (matching the
  // base64 text instead failed now and then: random base64 contains "eyJ" in about 3 % of files).
  expect(Buffer.from(data as string, 'base64').toString('latin1')).not.toMatch(/BEGIN|PRIVATE|eyJ|refresh|"d":/);
  expect(fs.readdirSync(home).sort()).toEqual(['keystore.json']);
});

test('status, search, book (patient from a file) and cancel', async () => {
  const status = await cli(['status']);
  expect(status.json).toMatchObject({ server: origin, client_id: clientId, logged_in: true });
  const schedules = await cli(['search', 'Schedule', '_count=1']);
  const schedule = schedules.json.entry[0].resource.id;
  const search = await cli(['search', 'Slot', `schedule=Schedule/${schedule}`, 'status=free', '_count=5']);
  expect(search.code).toBe(0);
  expect(search.json.resourceType).toBe('Bundle');
  const slot = search.json.entry[0].resource;
  fs.writeFileSync(path.join(dir, 'patient.json'), JSON.stringify({ resourceType: 'Patient', active: true, name: [{ family: 'Muster', given: ['Erika'] }] }));
  const book = await cli(['book', '--slot', `Slot/${slot.id}`, '--patient-file', path.join(dir, 'patient.json')]);
  expect(book.stderr).toBe('');
  expect(book.code).toBe(0);
  const appointment = book.json.resourceType === 'Appointment' ? book.json : book.json.entry?.find((e: any) => e.resource.resourceType === 'Appointment')?.resource;
  expect(appointment).toMatchObject({ resourceType: 'Appointment', slot: [{ reference: `Slot/${slot.id}` }] });
  const cancel = await cli(['cancel', `Appointment/${appointment.id}`]);
  expect(cancel.code).toBe(0);
  expect(cancel.json.status).toBe('cancelled');
  const get = await cli(['get', `Appointment/${appointment.id}`]);
  expect(get.json.status).toBe('cancelled');
  const missing = await cli(['get', 'Appointment/does-not-exist']);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/404/);
});

test('--asl: the same search through the additional security layer (only /ASL paths on the wire)', async () => {
  const schedules = await cli(['search', 'Schedule', '_count=1']);
  const schedule = schedules.json.entry[0].resource.id;
  const before = seen.length;
  const r = await cli(['search', 'Slot', `schedule=Schedule/${schedule}`, 'status=free', '_count=2', '--asl']);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.json.resourceType).toBe('Bundle');
  const wire = seen.slice(before);
  expect(wire.some((p) => p === '/ASL')).toBe(true);
  expect(wire.some((p) => p.startsWith('/fhir'))).toBe(false);
});

test('a wrong password: exit 2, a clear message, the file untouched', async () => {
  const file = path.join(home, 'keystore.json');
  const before = fs.readFileSync(file);
  const r = await cli(['status'], { password: 'wrong' });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/wrong TERMINUS_CLIENT_PASSWORD/);
  expect(fs.readFileSync(file).equals(before)).toBe(true);
});

test('two parallel calls after the access token expired: one refresh, both succeed', async () => {
  const store = await KeyStore.open({ home, password: PASSWORD });
  store.server(origin).accessExpiresAt = Math.floor(Date.now() / 1000) - 1;
  store.save();
  store.close();
  const rows = async () => (await server.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM guard_refresh_token t JOIN guard_session s ON s.sid = t.sid WHERE s.client_id = $1', [clientId])).rows[0].n;
  const before = Number(await rows());
  const [a, b] = await Promise.all([cli(['search', 'Slot', '_count=1']), cli(['search', 'Schedule', '_count=1'])]);
  expect([a.code, b.code]).toEqual([0, 0]);
  expect(Number(await rows())).toBe(before + 1);
});

test('503 with Retry-After is waited out; 429 for good gives up with exit 1 after the bound', async () => {
  script.push({ match: /^\/fhir\/Slot/, status: 503, count: 2, retryAfter: '1' });
  const ok = await cli(['search', 'Slot', '_count=1']);
  expect(ok.code).toBe(0);
  expect(ok.ms).toBeGreaterThanOrEqual(2000);
  script.push({ match: /^\/fhir\/Slot/, status: 429, count: 100, retryAfter: '1' });
  try {
    const refused = await cli(['search', 'Slot', '_count=1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/429/);
    expect(refused.stderr).toMatch(/rate_limit_exceeded/);
  } finally {
    script.length = 0;
  }
});

test('a guard URL that moved (404): discovery again, then success', async () => {
  const store = await KeyStore.open({ home, password: PASSWORD });
  const d = store.server(origin).discovery!;
  d.authorizationServer.token_endpoint = `${origin}/svc/v1/moved-token`;
  store.server(origin).accessExpiresAt = 0;
  store.save();
  store.close();
  const r = await cli(['search', 'Slot', '_count=1']);
  expect(r.code).toBe(0);
  const after = await KeyStore.open({ home, password: PASSWORD });
  expect(after.server(origin).discovery!.authorizationServer.token_endpoint).toBe(`${origin}/svc/v1/token`);
  after.close();
});

test('a request for another origin than PUBLIC_URL: exit 1, the guard error and the origin the server expects', async () => {
  // The server's own listener, not the origin its PUBLIC_URL names (the proxy in front of it).
  const other = server.url;
  // A key store of its own: one client key registers once per guard, whatever origin reaches it.
  const r = await cli(['get', 'Schedule', '--server', other, ...card()], { home: path.join(dir, 'other-home') });
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/invalid_(token|dpop_proof)/);
  expect(r.stderr).toContain(`expects requests for the origin ${origin}`);
});

test('logout revokes the refresh token at the server; a second login reuses the registration', async () => {
  const out = await cli(['logout']);
  expect(out.code).toBe(0);
  const revoked = await server.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM guard_session WHERE client_id = $1 AND revoked_at IS NULL', [clientId]);
  expect(revoked.rows[0].n).toBe('0');
  expect((await cli(['status'])).json.logged_in).toBe(false);
  // No silent token exchange with the remembered card: the user is told to log in.
  const get = await cli(['get', 'Schedule?_count=1']);
  expect(get.code).toBe(2);
  expect(get.stderr).toBe(`terminus-client: not logged in to ${origin} (logged out): run terminus-client login\n`);
  const again = await cli(['login', ...card()]);
  expect(again.code).toBe(0);
  expect(again.json.client_id).toBe(clientId);
});

test('stress search and book: bounded, p50/p95/p99, errors by status', async () => {
  for (const scenario of ['search', 'book', 'refresh-storm']) {
    const r = await cli(['stress', scenario, '--duration', '2', '--concurrency', '2', '--max-requests', '6']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.json).toMatchObject({ scenario, concurrency: 2, errors: {} });
    expect(r.json.requests).toBeGreaterThan(0);
    expect(r.json.requests).toBeLessThanOrEqual(6);
    expect(r.json.p99_ms).toBeGreaterThanOrEqual(r.json.p50_ms);
  }
});

test('the guard forgot the client (401 at the token endpoint): one fresh registration, then success', async () => {
  const store = await KeyStore.open({ home, password: PASSWORD });
  const oldClient = store.server(origin).clientId!;
  store.server(origin).accessExpiresAt = 0;
  store.server(origin).refreshToken = 'unknown';
  store.save();
  store.close();
  await server.ctx.db.query('DELETE FROM guard_client WHERE client_id = $1', [oldClient]);
  const r = await cli(['search', 'Schedule', '_count=1']);
  expect(r.code).toBe(0);
  const status = await cli(['status']);
  expect(status.json.client_id).not.toBe(oldClient);
  clientId = status.json.client_id;
});

test('usage errors exit 2; --version and --help exit 0', async () => {
  const fresh = await cli(['status', '--server', origin], { home: path.join(dir, 'fresh-home') });
  expect(fresh.code).toBe(0);
  expect(fresh.json).toMatchObject({ server: origin, logged_in: false, client_id: null });
  expect((await cli(['search'])).code).toBe(2);
  expect((await cli(['book', '--slot', 'Slot/x'])).code).toBe(2);
  expect((await cli(['frobnicate'])).code).toBe(2);
  const v = await cli(['--version']);
  expect(v.code).toBe(0);
  expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  expect((await cli(['login', '--help'])).stdout).toMatch(/--attestation/);
});

test('the library: fhir-kit-client reads and searches through the session (requestSigner), and fetch signs every call', async () => {
  const session = await createClient({ server: origin, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'lib-home'), password: PASSWORD });
  try {
    // fhir-kit-client 2 is an ES module only: loaded by Node itself, outside Jest's CommonJS registry.
    const { Client } = (await new Function('m', 'return import(m)')('fhir-kit-client')) as { Client: typeof FhirKitClient };
    const fhir = new Client({ baseUrl: `${origin}/fhir`, requestSigner: session.requestSigner });
    const bundle = (await fhir.search({ resourceType: 'Slot', searchParams: { _count: '2' } })) as unknown as { entry: { resource: { id: string } }[] };
    expect(bundle.entry.length).toBeGreaterThan(0);
    const slot = (await fhir.read({ resourceType: 'Slot', id: bundle.entry[0].resource.id })) as unknown as { resourceType: string };
    expect(slot.resourceType).toBe('Slot');
    const res = await session.fetch(`${origin}/fhir/Schedule?_count=1`);
    expect(res.status).toBe(200);
    // Concurrent calls with an expired access token share one refresh.
    const sid = async () => (await server.ctx.db.query<{ n: string }>('SELECT count(*)::text AS n FROM guard_refresh_token')).rows[0].n;
    session.guard.tokens = { ...session.guard.tokens!, expiresAt: 0 };
    const before = Number(await sid());
    const answers = await Promise.all(Array.from({ length: 5 }, () => session.fetch(`${origin}/fhir/Schedule?_count=1`)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(Number(await sid())).toBe(before + 1);
    const proofs = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const h = new Headers();
      await session.requestSigner(`${origin}/fhir/Slot`, { method: 'GET', headers: h });
      proofs.add(h.get('dpop')!);
    }
    expect(proofs.size).toBe(2);
  } finally {
    session.close();
  }
  expect(crypto.randomUUID()).toBeTruthy();
});
