import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { JWK } from 'jose';

/** What the reference client keeps per guard instance (keyed by its origin). */
export interface ServerState {
  clientId?: string;
  attestationType?: 'software' | 'tpm';
  refreshToken?: string;
  accessToken?: string;
  /** Seconds since the epoch. */
  accessExpiresAt?: number;
  scope?: string;
  /** The session's DPoP key (private JWK); gone at logout. */
  dpopKey?: JWK;
  /** Set by logout: no token exchange with the remembered card until the next login. */
  loggedOut?: boolean;
  /** Discovery documents with their ETags, revalidated after 24 h. */
  discovery?: { resource: Record<string, unknown>; authorizationServer: Record<string, unknown>; fetchedAt: number; etags: { resource?: string; authorizationServer?: string } };
}

export interface StoreData {
  /** The client instance key (private JWK), created once. */
  clientKey?: JWK;
  lastServer?: string;
  servers: Record<string, ServerState>;
}

/** The key store cannot be used: wrong password, a corrupted or foreign file, a held lock. Exit 2. */
export class KeyStoreError extends Error {}

const FORMAT = 'terminus-client-keystore';
const FILE = 'keystore.json';
// scrypt N = 2^15, r = 8, p = 1: 32 MiB and tens of milliseconds per unlock (RFC 7914 §2 interactive use).
const SCRYPT = { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
/**
 * The shortest password a new key store takes. Whoever copies the file can guess offline: scrypt
 * makes each guess cost, but only length makes the guesses many. A store made before keeps opening
 * with its password.
 */
export const MIN_NEW_PASSWORD_LENGTH = 12;

interface Envelope {
  format: typeof FORMAT;
  version: 1;
  kdf: { name: 'scrypt'; salt: string; N: number; r: number; p: number };
  cipher: 'aes-256-gcm';
  iv: string;
  tag: string;
  data: string;
}

export function defaultHome(): string {
  return process.env.TERMINUS_CLIENT_HOME ?? path.join(os.homedir(), '.terminus-client');
}

/**
 * One encrypted file (mode 600) in a mode-700 folder: AES-256-GCM under a key derived with scrypt
 * from the password. Writes go to a temporary file that is renamed over the old one, so a crash
 * leaves either the old or the new file. `open` takes a lock file so that two CLI processes do not
 * lose each other's refresh-token rotation: the second waits until the first has written.
 */
export class KeyStore {
  private constructor(
    readonly home: string,
    /** scrypt(password, salt): derived once per open, not on every save. */
    private readonly key: Buffer,
    private readonly salt: Buffer,
    private readonly lock: () => void,
    public data: StoreData,
  ) {}

  static async open(o: { home?: string; password?: string; lockTimeoutMs?: number } = {}): Promise<KeyStore> {
    const home = o.home ?? defaultHome();
    const password = o.password ?? process.env.TERMINUS_CLIENT_PASSWORD;
    if (!password) throw new KeyStoreError('TERMINUS_CLIENT_PASSWORD must be set (library: the password option): it encrypts the key store');
    fs.mkdirSync(home, { recursive: true, mode: 0o700 });
    fs.chmodSync(home, 0o700);
    const release = await acquireLock(path.join(home, `${FILE}.lock`), o.lockTimeoutMs ?? 60_000);
    try {
      const file = path.join(home, FILE);
      if (!fs.existsSync(file)) {
        const length = [...password].length;
        if (length < MIN_NEW_PASSWORD_LENGTH) {
          throw new KeyStoreError(`TERMINUS_CLIENT_PASSWORD is too short for a new key store in ${home}: ${length} characters, at least ${MIN_NEW_PASSWORD_LENGTH} (choose a long passphrase)`);
        }
        const salt = crypto.randomBytes(16);
        return new KeyStore(home, crypto.scryptSync(password, salt, 32, SCRYPT), salt, release, { servers: {} });
      }
      const { data, salt, key } = decrypt(fs.readFileSync(file), password);
      return new KeyStore(home, key, salt, release, data);
    } catch (err) {
      release();
      throw err;
    }
  }

  get file(): string {
    return path.join(this.home, FILE);
  }

  server(origin: string): ServerState {
    this.data.servers[origin] ??= {};
    return this.data.servers[origin];
  }

  /** Writes atomically: temp file (mode 600) then rename. */
  save(): void {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(FORMAT));
    const data = Buffer.concat([cipher.update(JSON.stringify(this.data)), cipher.final()]);
    const envelope: Envelope = {
      format: FORMAT,
      version: 1,
      kdf: { name: 'scrypt', salt: this.salt.toString('base64'), N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p },
      cipher: 'aes-256-gcm',
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      data: data.toString('base64'),
    };
    const tmp = `${this.file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    const fd = fs.openSync(tmp, 'w', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify(envelope));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
  }

  close(): void {
    this.lock();
  }
}

function decrypt(raw: Buffer, password: string): { data: StoreData; salt: Buffer; key: Buffer } {
  let envelope: Envelope;
  try {
    envelope = JSON.parse(raw.toString('utf8')) as Envelope;
  } catch {
    throw new KeyStoreError('the key store file is not a terminus-client key store (corrupted or foreign); it was left untouched');
  }
  if (envelope?.format !== FORMAT || envelope.version !== 1 || envelope.kdf?.name !== 'scrypt' || envelope.cipher !== 'aes-256-gcm') {
    throw new KeyStoreError('the key store file is not a terminus-client key store (corrupted or foreign); it was left untouched');
  }
  const salt = Buffer.from(envelope.kdf.salt, 'base64');
  try {
    const key = crypto.scryptSync(password, salt, 32, { N: envelope.kdf.N, r: envelope.kdf.r, p: envelope.kdf.p, maxmem: SCRYPT.maxmem });
    const decipher = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(envelope.iv, 'base64'));
    decipher.setAAD(Buffer.from(FORMAT));
    decipher.setAuthTag(Buffer.from(envelope.tag, 'base64'));
    const plain = Buffer.concat([decipher.update(Buffer.from(envelope.data, 'base64')), decipher.final()]);
    const data = JSON.parse(plain.toString('utf8')) as StoreData;
    data.servers ??= {};
    // A store written with other scrypt parameters is re-keyed with ours at the next save.
    const ours = envelope.kdf.N === SCRYPT.N && envelope.kdf.r === SCRYPT.r && envelope.kdf.p === SCRYPT.p;
    return { data, salt, key: ours ? key : crypto.scryptSync(password, salt, 32, SCRYPT) };
  } catch {
    throw new KeyStoreError('wrong TERMINUS_CLIENT_PASSWORD, or the key store is corrupted; it was left untouched');
  }
}

/** An exclusive lock file holding our pid; a lock of a dead process is taken over. */
async function acquireLock(file: string, timeoutMs: number): Promise<() => void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    // The lock file appears with its holder's pid already in it (written aside, then linked into
    // place, which fails if the lock exists): a lock created empty and written after could be read
    // empty by another process in between, taken for a stale lock and removed, and two processes
    // would hold it (two refreshes of one refresh token: reuse, the session revoked).
    const aside = `${file}.${process.pid}.${crypto.randomUUID()}`;
    fs.writeFileSync(aside, String(process.pid), { mode: 0o600 });
    let linked = false;
    try {
      fs.linkSync(aside, file);
      linked = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.rmSync(aside, { force: true });
    }
    if (linked) {
      let released = false;
      return () => {
        if (released) return;
        released = true;
        fs.rmSync(file, { force: true });
      };
    }
    let holder: number;
    try {
      holder = Number(fs.readFileSync(file, 'utf8').trim() || NaN);
    } catch {
      continue; // released between our attempt and the read
    }
    if (!Number.isInteger(holder) || !alive(holder)) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > until) throw new KeyStoreError(`the key store is locked by process ${holder}`);
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 50));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
