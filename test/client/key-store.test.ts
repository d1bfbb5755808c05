import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KeyStore, KeyStoreError } from '../../src/client';

/** The reference client's key store (docs/requirements.md#reference-client-and-sdk), in process. */
let home: string;
beforeEach(() => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'keystore-'));
});
afterEach(() => fs.rmSync(home, { recursive: true, force: true }));

const PASSWORD = 'a passphrase long enough';
const open = (password = PASSWORD, lockTimeoutMs?: number) => KeyStore.open({ home, password, lockTimeoutMs });

test('round trip; a corrupted or foreign file is refused with a clear message and left untouched', async () => {
  const s = await open();
  s.server('http://a.example').clientId = 'c-1';
  s.save();
  s.close();
  const again = await open();
  expect(again.data.servers['http://a.example'].clientId).toBe('c-1');
  again.close();
  const file = path.join(home, 'keystore.json');
  const envelope = JSON.parse(fs.readFileSync(file, 'utf8'));
  envelope.data = Buffer.from('tampered').toString('base64');
  fs.writeFileSync(file, JSON.stringify(envelope));
  const corrupted = fs.readFileSync(file);
  await expect(open()).rejects.toThrow(KeyStoreError);
  await expect(open()).rejects.toThrow(/wrong TERMINUS_CLIENT_PASSWORD, or the key store is corrupted/);
  expect(fs.readFileSync(file).equals(corrupted)).toBe(true);
  fs.writeFileSync(file, '{"some":"other tool"}');
  await expect(open()).rejects.toThrow(/not a terminus-client key store/);
  fs.writeFileSync(file, 'garbage');
  await expect(open()).rejects.toThrow(/not a terminus-client key store/);
  expect(fs.readFileSync(file, 'utf8')).toBe('garbage');
});

test('no password: a clear error', async () => {
  const saved = process.env.TERMINUS_CLIENT_PASSWORD;
  delete process.env.TERMINUS_CLIENT_PASSWORD;
  try {
    await expect(KeyStore.open({ home })).rejects.toThrow(/TERMINUS_CLIENT_PASSWORD must be set/);
  } finally {
    if (saved !== undefined) process.env.TERMINUS_CLIENT_PASSWORD = saved;
  }
});

test('the lock: a second opener waits for the first; a lock left by a dead process is taken over; a held lock times out', async () => {
  const first = await open();
  let secondOpened = false;
  const second = open().then((s) => {
    secondOpened = true;
    return s;
  });
  await new Promise((r) => setTimeout(r, 300));
  expect(secondOpened).toBe(false);
  first.server('x').clientId = 'from-first';
  first.save();
  first.close();
  const s2 = await second;
  expect(s2.data.servers.x.clientId).toBe('from-first');
  await expect(open(PASSWORD, 200)).rejects.toThrow(/locked by process/);
  s2.close();
  fs.writeFileSync(path.join(home, 'keystore.json.lock'), '999999999');
  const taken = await open(PASSWORD, 2000);
  taken.close();
});

test('writes are atomic: no temporary file is left, the mode stays 600', async () => {
  const s = await open();
  for (let i = 0; i < 3; i++) {
    s.server('x').refreshToken = `r-${i}`;
    s.save();
  }
  s.close();
  expect(fs.readdirSync(home)).toEqual(['keystore.json']);
  expect(fs.statSync(path.join(home, 'keystore.json')).mode & 0o777).toBe(0o600);
});

test('a new key store refuses a short password and writes nothing; an existing one keeps opening with its short password', async () => {
  for (const short of ['x', 'elevenchars', 'ääääääääääß']) {
    const err = await open(short).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeyStoreError);
    expect((err as Error).message).toMatch(new RegExp(`TERMINUS_CLIENT_PASSWORD is too short for a new key store in .+: ${[...short].length} characters, at least 12`));
  }
  expect(fs.readdirSync(home)).toEqual([]);
  (await open('twelve chars')).close();
  // A store written before the rule, with a one-letter password (the format: scrypt, AES-256-GCM, the format name as AAD).
  const salt = crypto.randomBytes(16);
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', crypto.scryptSync('x', salt, 32, { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }), iv);
  cipher.setAAD(Buffer.from('terminus-client-keystore'));
  const data = Buffer.concat([cipher.update(JSON.stringify({ servers: { 'http://old.example': { clientId: 'c-old' } } })), cipher.final()]);
  const envelope = { format: 'terminus-client-keystore', version: 1, kdf: { name: 'scrypt', salt: salt.toString('base64'), N: 32768, r: 8, p: 1 }, cipher: 'aes-256-gcm', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  fs.writeFileSync(path.join(home, 'keystore.json'), JSON.stringify(envelope), { mode: 0o600 });
  const old = await open('x');
  expect(old.data.servers['http://old.example'].clientId).toBe('c-old');
  old.save();
  old.close();
  (await open('x')).close();
});
