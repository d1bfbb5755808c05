import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { migratedDataDir } from './helpers/context';
import { entryArgs } from './helpers/entry';

/**
 * Configuration (docs/requirements.md#configuration) as an operator meets it: `terminus serve` with
 * a bad setting exits non-zero with one stderr line naming the variable, and leaves nothing running
 * (no hang on an open store or Redis).
 */
const run = promisify(execFile);
const MAIN = path.join(__dirname, '..', 'src', 'main.ts');
let dataDir: string;
const BASE_ENV = { PATH: process.env.PATH, LOG_LEVEL: 'silent', DATA_DIR: '', DEMO_DATA: 'false', PORT: '0', METRICS_PORT: '0' };

function terminus(args: string[], env: Record<string, string | undefined>) {
  return run(process.execPath, [...entryArgs(MAIN), ...args], { env: { ...BASE_ENV, ...env }, timeout: 90_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number | null; signal?: string; stdout: string; stderr: string }) => ({ code: e.code ?? e.signal, stdout: e.stdout, stderr: e.stderr }),
  );
}

test('terminus --version prints the package version and exits 0', async () => {
  const r = await terminus(['--version'], {});
  expect(r.code).toBe(0);
  expect(r.stdout.trim()).toBe((JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version);
}, 120_000);

let taken: net.Server;
let takenPort: number;
let files: string;

beforeAll(async () => {
  // A migrated store makes each start below fail fast at the step under test (a fresh one is
  // migrated by the `migrate` below; a copy of a migrated one finds nothing to do).
  dataDir = BASE_ENV.DATA_DIR = await migratedDataDir('terminus-ops-');
  files = path.join(dataDir, 'files');
  fs.mkdirSync(files);
  fs.writeFileSync(path.join(files, 'broken.json'), '{"allowed_professions": [');
  fs.writeFileSync(path.join(files, 'wrong-shape.json'), '{"professions": "not a list"}');
  fs.writeFileSync(path.join(files, 'not.pem'), 'no certificate here\n');
  taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  takenPort = (taken.address() as net.AddressInfo).port;
  expect((await terminus(['migrate'], {})).code).toBe(0);
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('serve with a bad setting stops with one line naming the variable', () => {
  test.each<[string, () => Record<string, string>, RegExp]>([
    ['HOST', () => ({ HOST: 'no.such.host.invalid' }), /^terminus: HOST: cannot listen on "no\.such\.host\.invalid"/],
    ['PORT', () => ({ PORT: String(takenPort) }), /^terminus: PORT: 127\.0\.0\.1:\d+ is already in use/],
    ['METRICS_PORT', () => ({ METRICS_PORT: String(takenPort) }), /^terminus: METRICS_PORT: 127\.0\.0\.1:\d+ is already in use by another process \(0 switches metrics off\)$/],
    ['POLICY_FILE', () => ({ POLICY_FILE: path.join(files, 'missing.json') }), /^terminus: POLICY_FILE: file not found: /],
    ['POLICY_FILE', () => ({ POLICY_FILE: path.join(files, 'broken.json') }), /^terminus: POLICY_FILE: .*broken\.json is not readable JSON/],
    ['POLICY_FILE', () => ({ POLICY_FILE: path.join(files, 'wrong-shape.json') }), /^terminus: POLICY_FILE: .*wrong-shape\.json: professions, posture_types, products and audiences must be arrays$/],
    ['CARD_TRUST_ANCHORS', () => ({ CARD_TRUST_ANCHORS: path.join(files, 'not.pem') }), /^terminus: CARD_TRUST_ANCHORS: no PEM certificate/],
    ['DATABASE_URL', () => ({ DATABASE_URL: 'postgresql://terminus:secret@127.0.0.1:1/terminus' }), /^terminus: DATABASE_URL: cannot use the store at postgresql:\/\/terminus:\*\*\*@127\.0\.0\.1:1\/terminus: connect ECONNREFUSED/],
    ['REDIS_URL', () => ({ REDIS_URL: 'redis://127.0.0.1:1' }), /^terminus: REDIS_URL: cannot reach redis:\/\/127\.0\.0\.1:1: connect ECONNREFUSED/],
    ['PUBLIC_URL', () => ({ PUBLIC_URL: 'http://h:1/x?y=1#f' }), /^terminus: PUBLIC_URL: must be an origin/],
    ['CARD_TRUST_ANCHORS', () => ({ NODE_ENV: 'production', GUARD_KEY_SECRET: 'x'.repeat(32) }), /^terminus: CARD_TRUST_ANCHORS: must name a PEM file/],
  ])('%s', async (_variable, env, line) => {
    const r = await terminus(['serve'], env());
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
    // The failed start released the embedded store.
    expect(fs.existsSync(path.join(dataDir, 'terminus.lock'))).toBe(false);
  }, 120_000);

  test('a taken PORT or METRICS_PORT, a foreign HOST or a POLICY_FILE of the wrong shape stops the start before the store is opened: a new DATA_DIR stays empty', async () => {
    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-ops-fresh-'));
    try {
      for (const env of [{ PORT: String(takenPort) }, { METRICS_PORT: String(takenPort) }, { HOST: 'no.such.host.invalid' }, { POLICY_FILE: path.join(files, 'wrong-shape.json') }]) {
        const r = await terminus(['serve'], { ...env, DATA_DIR: fresh });
        expect(r.code).toBe(2);
        expect(r.stderr.trim()).toMatch(/^terminus: (PORT|METRICS_PORT|HOST|POLICY_FILE): /);
        expect(fs.readdirSync(fresh)).toEqual([]);
      }
    } finally {
      fs.rmSync(fresh, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('one process at a time on the embedded DATA_DIR', () => {
  test('import and migrate refuse a DATA_DIR a running server holds; SIGTERM releases it', async () => {
    const server = spawn(process.execPath, [...entryArgs(MAIN), 'serve'], { env: { ...BASE_ENV, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      await listening(server);
      const expected = `terminus: DATA_DIR: ${dataDir} is in use by process ${server.pid}`;
      const fixture = path.join(__dirname, '..', 'fixtures', 'isik-stufe5.json');
      const imported = await terminus(['import', fixture], {});
      expect([imported.code, imported.stderr.trim()]).toEqual([2, `${expected} (a running server): import through it as an owner (terminus-client http POST /fhir --data FILE, a transaction Bundle) or stop it first`]);
      const migrated = await terminus(['migrate'], {});
      expect([migrated.code, migrated.stderr.trim()]).toEqual([2, expected]);
      expect(fs.readFileSync(path.join(dataDir, 'terminus.lock'), 'utf8').trim()).toBe(String(server.pid));
    } finally {
      server.kill('SIGTERM');
    }
    const [code] = await new Promise<[number | null]>((resolve) => server.once('exit', (c) => resolve([c])));
    expect(code).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'terminus.lock'))).toBe(false);
  }, 120_000);

  test('LOG_FORMAT=pretty writes readable lines, not JSON', async () => {
    const server = spawn(process.execPath, [...entryArgs(MAIN), 'serve'], { env: { ...BASE_ENV, LOG_LEVEL: 'info', LOG_FORMAT: 'pretty' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    server.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await listening(server);
    } finally {
      server.kill('SIGTERM');
    }
    await new Promise((resolve) => server.once('exit', resolve));
    const line = out.split('\n').find((l) => l.includes('terminus listening'))!;
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*: terminus listening/);
    expect(out.split('\n').filter((l) => l.startsWith('{'))).toEqual([]);
  }, 120_000);

  test('a lock left by a dead process is taken over', async () => {
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((resolve) => dead.once('exit', resolve));
    fs.writeFileSync(path.join(dataDir, 'terminus.lock'), `${dead.pid}\n`);
    const r = await terminus(['migrate'], {});
    expect([r.code, r.stdout.trim()]).toEqual([0, 'schema up to date']);
    expect(fs.existsSync(path.join(dataDir, 'terminus.lock'))).toBe(false);
  }, 120_000);
});

function listening(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('terminus listening')) resolve();
    });
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
}
