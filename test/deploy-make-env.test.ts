import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * `deploy/make-env` writes the secrets of docker-compose.yml's `.env` itself, mode 600 whatever the
 * caller's umask, and never replaces an existing file unless told to: the file the shell creates
 * for `deploy/make-env > .env` was readable by every user (mode 644) and a second run replaced
 * GUARD_KEY_SECRET, which makes the sealed signing keys unreadable.
 */
const SCRIPT = path.join(__dirname, '..', 'deploy', 'make-env');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'make-env-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The script under the usual umask 022, from `dir`; `stdoutFile` stands for the shell's `> FILE`. */
function makeEnv(args: string[], o: { stdoutFile?: string } = {}) {
  const stdout = o.stdoutFile ? fs.openSync(o.stdoutFile, 'w', 0o644) : 'pipe';
  try {
    const r = spawnSync('sh', ['-c', 'umask 022; exec "$0" "$@"', SCRIPT, ...args], { cwd: dir, env: { PATH: process.env.PATH }, stdio: ['ignore', stdout, 'pipe'], encoding: 'utf8' });
    return { code: r.status, stderr: r.stderr.trim() };
  } finally {
    if (typeof stdout === 'number') fs.closeSync(stdout);
  }
}

const mode = (file: string) => fs.statSync(file).mode & 0o777;
const values = (file: string) => Object.fromEntries(fs.readFileSync(file, 'utf8').split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));

test('deploy/make-env .env writes the file itself, mode 600, with fresh secrets', () => {
  const r = makeEnv(['.env', '1-20-ARZTPRAXIS-ABC']);
  expect(r.code).toBe(0);
  expect(r.stderr.split('\n')[0]).toBe('deploy/make-env: wrote .env (mode 600)');
  const env = path.join(dir, '.env');
  expect(mode(env)).toBe(0o600);
  expect(values(env)).toEqual({
    GUARD_KEY_SECRET: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/),
    POSTGRES_PASSWORD: expect.stringMatching(/^[0-9a-f]{48}$/),
    REPOSITORY_OWNERS: '1-20-ARZTPRAXIS-ABC',
    PUBLIC_URL: 'https://localhost',
    SMTP_URL: 'smtp://mail.example.org:587',
  });
  // Nothing else is left beside it (the temporary file it was written to) but the development certificate.
  expect(fs.readdirSync(dir).sort()).toEqual(['.env', 'deploy']);
});

test('a development certificate for localhost, once: its chain verifies, its key is private, a second run keeps it', () => {
  const tls = path.join(dir, 'deploy', 'tls');
  expect(fs.readdirSync(tls).sort()).toEqual(['chain.pem', 'dev-ca.pem', 'internal', 'tls.crt', 'tls.key']);
  expect(mode(path.join(tls, 'tls.key'))).toBe(0o600);
  const [leaf, ca] = fs.readFileSync(path.join(tls, 'tls.crt'), 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)!.map((p) => new crypto.X509Certificate(p));
  expect(leaf.checkHost('localhost')).toBe('localhost');
  expect(leaf.checkIP('127.0.0.1')).toBe('127.0.0.1');
  expect(leaf.verify(ca.publicKey)).toBe(true);
  expect(leaf.checkPrivateKey(crypto.createPrivateKey(fs.readFileSync(path.join(tls, 'tls.key'))))).toBe(true);
  expect(fs.readFileSync(path.join(tls, 'dev-ca.pem'), 'utf8')).toBe(fs.readFileSync(path.join(tls, 'chain.pem'), 'utf8'));
  const before = fs.readFileSync(path.join(tls, 'tls.crt'), 'utf8');
  expect(makeEnv(['--force', '.env']).code).toBe(0);
  expect(fs.readFileSync(path.join(tls, 'tls.crt'), 'utf8')).toBe(before);
});

test('the replicas\' internal certificate, once: names of the compose network, its own CA, a key only the container user reads', () => {
  const internal = path.join(dir, 'deploy', 'tls', 'internal');
  expect(fs.readdirSync(internal).sort()).toEqual(['internal-ca.pem', 'replica.crt', 'replica.key']);
  const replica = new crypto.X509Certificate(fs.readFileSync(path.join(internal, 'replica.crt')));
  const ca = new crypto.X509Certificate(fs.readFileSync(path.join(internal, 'internal-ca.pem')));
  for (const name of ['terminus', 'terminus-1', 'terminus-2']) expect(replica.checkHost(name)).toBe(name);
  expect(replica.verify(ca.publicKey)).toBe(true);
  expect(ca.subject).not.toBe(new crypto.X509Certificate(fs.readFileSync(path.join(dir, 'deploy', 'tls', 'dev-ca.pem'))).subject);
  expect(replica.checkPrivateKey(crypto.createPrivateKey(fs.readFileSync(path.join(internal, 'replica.key'))))).toBe(true);
  const uid = process.getuid!();
  expect(mode(path.join(internal, 'replica.key'))).toBe(uid === 0 || uid === 1000 ? 0o600 : 0o644);
  if (uid === 0) expect(fs.statSync(path.join(internal, 'replica.key')).uid).toBe(1000);
  const before = fs.readFileSync(path.join(internal, 'replica.crt'), 'utf8');
  expect(makeEnv(['--force', '.env']).code).toBe(0);
  expect(fs.readFileSync(path.join(internal, 'replica.crt'), 'utf8')).toBe(before);
});

test('an existing file is kept; --force replaces it, still mode 600', () => {
  const env = path.join(dir, '.env');
  const before = fs.readFileSync(env, 'utf8');
  const secret = values(env).GUARD_KEY_SECRET;
  const again = makeEnv(['.env']);
  expect([again.code, again.stderr]).toEqual([1, expect.stringMatching(/^deploy\/make-env: \.env exists; .* replace it with --force$/)]);
  expect(fs.readFileSync(env, 'utf8')).toBe(before);
  fs.chmodSync(env, 0o644);
  const forced = makeEnv(['--force', '.env']);
  expect(forced.code).toBe(0);
  expect(mode(env)).toBe(0o600);
  expect(values(env).GUARD_KEY_SECRET).toMatch(/^[A-Za-z0-9+/]{43}=$/);
  expect(values(env).GUARD_KEY_SECRET).not.toBe(secret);
});

test('the old form `deploy/make-env 1-2-DEV-PRAXIS-P256 > .env` writes no secrets and says how to call it', () => {
  const env = path.join(dir, 'old', '.env');
  fs.mkdirSync(path.dirname(env));
  const old = makeEnv(['1-2-DEV-PRAXIS-P256'], { stdoutFile: env });
  expect([old.code, old.stderr]).toEqual([2, 'deploy/make-env: 1-2-DEV-PRAXIS-P256 is a Telematik-ID, not a file to write: deploy/make-env .env 1-2-DEV-PRAXIS-P256']);
  expect(fs.readFileSync(env, 'utf8')).toBe('');
  expect(fs.existsSync(path.join(dir, '1-2-DEV-PRAXIS-P256'))).toBe(false);
  // The empty file the shell left is not taken for a kept one.
  const next = makeEnv(['old/.env']);
  expect([next.code, next.stderr]).toEqual([1, 'deploy/make-env: old/.env exists and is empty (left by the old form `deploy/make-env > old/.env`?): remove it, or replace it with --force']);
  const noFile = makeEnv([]);
  expect([noFile.code, noFile.stderr]).toEqual([2, 'usage: deploy/make-env [--force] FILE [OWNER_TELEMATIK_IDS]   (e.g. deploy/make-env .env)']);
});
