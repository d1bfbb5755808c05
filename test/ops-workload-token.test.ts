import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { listeningUrl } from './helpers/serve';
import { migratedDataDir } from './helpers/context';
import { entryArgs } from './helpers/entry';

/**
 * `terminus workload-token` as an operator runs it beside `npm start` (docs/requirements.md, Workload token exchange: this guard as
 * a workload issuer). The embedded store admits one process, so the running server mints the
 * token over DATA_DIR/terminus.sock; the token is signed with the key jwks_uri already publishes,
 * and minting never adds a key. The commands run on the embedded store whatever the project's
 * environment holds (test/store-env.js).
 */
const run = promisify(execFile);
const MAIN = path.join(__dirname, '..', 'src', 'main.ts');
let dataDir: string;
let socket: string;
const BASE_ENV = { PATH: process.env.PATH, DATA_DIR: '', DEMO_DATA: 'false', PORT: '0', METRICS_PORT: '0', PUBLIC_URL: 'https://a.example' };

function terminus(args: string[], env: Record<string, string> = {}) {
  return run(process.execPath, [...entryArgs(MAIN), ...args], { env: { ...BASE_ENV, LOG_LEVEL: 'silent', ...env }, timeout: 90_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number | null; signal?: string; stdout: string; stderr: string }) => ({ code: e.code ?? e.signal, stdout: e.stdout, stderr: e.stderr }),
  );
}

beforeAll(async () => {
  dataDir = BASE_ENV.DATA_DIR = await migratedDataDir('terminus-wt-');
  socket = path.join(dataDir, 'terminus.sock');
}, 120_000);
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('beside a running terminus serve on the embedded store', () => {
  let server: ChildProcess | undefined;
  let url = '';
  const jwks = async () => ((await (await fetch(`${url}/svc/v1/jwks`)).json()) as { keys: JWK[] }).keys;

  beforeAll(async () => {
    server = spawn(process.execPath, [...entryArgs(MAIN), 'serve'], { env: { ...BASE_ENV, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    url = await listeningUrl(server);
  }, 120_000);

  afterAll(async () => {
    if (!server || server.exitCode !== null) return;
    const exited = new Promise((resolve) => server!.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  });

  test('the server mints the token with its published key; two calls add no key to jwks_uri', async () => {
    const before = await jwks();
    const first = await terminus(['workload-token', '--sub', 'reporting', '--aud', 'https://b.example/svc/v1/token', '--ttl', '120']);
    expect([first.code, first.stderr]).toEqual([0, '']);
    const second = await terminus(['workload-token', '--sub', 'reporting', '--aud', 'https://b.example/svc/v1/token']);
    expect([second.code, second.stderr]).toEqual([0, '']);
    const after = await jwks();
    expect(after).toEqual(before);
    for (const token of [first.stdout.trim(), second.stdout.trim()]) {
      expect(after.map((k) => k.kid)).toContain(decodeProtectedHeader(token).kid);
      const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet({ keys: after }), { issuer: 'https://a.example', audience: 'https://b.example/svc/v1/token' });
      expect(protectedHeader).toMatchObject({ alg: 'ES256', typ: 'JWT' });
      expect(payload).toMatchObject({ sub: 'reporting', jti: expect.any(String) });
    }
    expect(decodeProtectedHeader(second.stdout.trim()).kid).toBe(decodeProtectedHeader(first.stdout.trim()).kid);
    // Only the user the server runs as may ask; the store stays the server's.
    expect(fs.statSync(socket).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(path.join(dataDir, 'terminus.lock'), 'utf8').trim()).toBe(String(server!.pid));
  }, 120_000);

  test("a request the server refuses: exit 2 with the server's words", async () => {
    const r = await terminus(['workload-token', '--sub', 'reporting', '--aud', '']);
    expect([r.code, r.stdout, r.stderr.trim()]).toEqual([2, '', `terminus: workload-token: the server on ${socket} refused: a workload token needs an audience (--aud)`]);
  }, 120_000);

  test('SIGTERM removes the socket with the lock; then the command opens the store itself and signs with the same key', async () => {
    const kids = (await jwks()).map((k) => k.kid);
    const exited = new Promise<number | null>((resolve) => server!.once('exit', resolve));
    server!.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect([fs.existsSync(socket), fs.existsSync(path.join(dataDir, 'terminus.lock'))]).toEqual([false, false]);
    const r = await terminus(['workload-token', '--sub', 'reporting', '--aud', 'https://b.example/svc/v1/token']);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(kids).toContain(decodeProtectedHeader(r.stdout.trim()).kid);
  }, 120_000);
});

test('PostgreSQL without GUARD_KEY_SECRET and no server to ask: exit 2 naming GUARD_KEY_SECRET, before the store is opened', async () => {
  const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-wt-pg-'));
  try {
    const r = await terminus(['workload-token', '--sub', 'reporting', '--aud', 'https://b.example/svc/v1/token'], { DATA_DIR: fresh, DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none' });
    expect([r.code, r.stdout, r.stderr.trim()]).toEqual([
      2,
      '',
      `terminus: GUARD_KEY_SECRET: unset, and no server answered on ${path.join(fresh, 'terminus.sock')}: set it to the servers' value, or run the command on a server's machine with its DATA_DIR`,
    ]);
    expect(fs.readdirSync(fresh)).toEqual([]);
  } finally {
    fs.rmSync(fresh, { recursive: true, force: true });
  }
}, 120_000);
