import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A tpm2-tools command failed or the TPM could not be reached. */
export class TpmCommandError extends Error {
  readonly code = 'tpm_error';
  constructor(
    message: string,
    /** The TPM did not answer at all (TCTI could not connect), rather than refusing a command. */
    readonly unreachable = false,
  ) {
    super(message);
  }
}

/** Persistent handles of the TCG EK Credential Profile and of our AK. */
export const EK_HANDLES = { rsa: 0x81010001, ecc384: 0x81010016 } as const;
export const EK_CERT_NV = { rsa: 0x01c00002, ecc384: 0x01c00016 } as const;
export const AK_HANDLE = 0x81010002;

export type EkKind = keyof typeof EK_HANDLES;

const hex = (h: number) => `0x${h.toString(16)}`;

/**
 * The TPM through tpm2-tools commands on one TCTI (TPM2TOOLS_TCTI). No resource manager is
 * assumed: transient objects are flushed after every command that loads one, the AK lives at a
 * persistent handle so it survives a TPM restart.
 */
export class TpmTools {
  /** tpm2-tools without a resource manager share the TPM's object slots: one command chain at a time. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly tcti: string,
    readonly ek: EkKind = 'rsa',
    readonly akHandle: number = AK_HANDLE,
  ) {}

  private async tool(name: string, args: string[]): Promise<void> {
    try {
      await run(name, args, { env: { ...process.env, TPM2TOOLS_TCTI: this.tcti }, timeout: 60_000 });
    } catch (err) {
      const e = err as { stderr?: string; message: string; code?: string };
      if (e.code === 'ENOENT') throw new TpmCommandError(`${name} is not installed (apt-get install tpm2-tools)`, true);
      const stderr = (e.stderr ?? e.message).trim();
      const unreachable = /tcti|connection refused|Failed to initialize|ECONNREFUSED|socket/i.test(stderr);
      throw new TpmCommandError(`${name} failed: ${stderr.split('\n').slice(-1)[0]}`, unreachable);
    }
  }

  private async flush(): Promise<void> {
    await this.tool('tpm2_flushcontext', ['-t']);
  }

  /** Runs `f` in a fresh temporary folder, after every earlier command chain of this object. */
  private inTemp<T>(f: (dir: string) => Promise<T>): Promise<T> {
    const run = async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'terminus-tpm-'));
      try {
        return await f(dir);
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** TPM2B_PUBLIC of a persistent object. */
  async readPublic(handle: number): Promise<Buffer> {
    return this.inTemp(async (dir) => {
      await this.tool('tpm2_readpublic', ['-c', hex(handle), '-f', 'tss', '-o', path.join(dir, 'pub')]);
      return fs.readFile(path.join(dir, 'pub'));
    });
  }

  async ekPublic(): Promise<Buffer> {
    return this.readPublic(EK_HANDLES[this.ek]);
  }

  /** The manufacturer's EK certificate (DER) from its NV index. */
  async ekCertificate(): Promise<Buffer> {
    return this.inTemp(async (dir) => {
      await this.tool('tpm2_nvread', [hex(EK_CERT_NV[this.ek]), '-C', 'o', '-o', path.join(dir, 'cert')]);
      return fs.readFile(path.join(dir, 'cert'));
    });
  }

  /** The AK's TPM2B_PUBLIC; created under the EK and made persistent at its handle the first time. */
  async ensureAk(): Promise<Buffer> {
    try {
      return await this.readPublic(this.akHandle);
    } catch {
      await this.inTemp(async (dir) => {
        const ctx = path.join(dir, 'ak.ctx');
        await this.tool('tpm2_createak', ['-C', hex(EK_HANDLES[this.ek]), '-c', ctx, '-G', 'ecc', '-g', 'sha256', '-s', 'ecdsa', '-u', path.join(dir, 'ak.pub'), '-f', 'tss']);
        await this.flush();
        await this.tool('tpm2_evictcontrol', ['-C', 'o', '-c', ctx, hex(this.akHandle)]);
        await this.flush();
      });
      return this.readPublic(this.akHandle);
    }
  }

  /** The AK signs `data`, hashed by the TPM (a restricted key refuses an outside digest); DER ECDSA. */
  async akSign(data: Buffer): Promise<Buffer> {
    return this.inTemp(async (dir) => {
      await fs.writeFile(path.join(dir, 'data'), data);
      await this.tool('tpm2_sign', ['-c', hex(this.akHandle), '-g', 'sha256', '-s', 'ecdsa', '-f', 'plain', '-o', path.join(dir, 'sig'), path.join(dir, 'data')]);
      await this.flush();
      return fs.readFile(path.join(dir, 'sig'));
    });
  }

  /** TPM2_ActivateCredential with the AK and the EK: the secret the server protected, if the names match. */
  async activateCredential(credentialBlob: Buffer, encryptedSecret: Buffer): Promise<Buffer> {
    return this.inTemp(async (dir) => {
      const header = Buffer.alloc(8);
      header.writeUInt32BE(0xbadcc0de, 0);
      header.writeUInt32BE(1, 4);
      await fs.writeFile(path.join(dir, 'cred'), Buffer.concat([header, credentialBlob, encryptedSecret]));
      const session = path.join(dir, 'session.ctx');
      // The RSA EK's policy is PolicySecret(endorsement); swtpm's P-384 EK allows user auth.
      const policy = this.ek === 'rsa';
      if (policy) {
        await this.tool('tpm2_startauthsession', ['--policy-session', '-S', session]);
        await this.tool('tpm2_policysecret', ['-S', session, '-c', 'e']);
      }
      try {
        await this.tool('tpm2_activatecredential', [
          '-c', hex(this.akHandle), '-C', hex(EK_HANDLES[this.ek]), '-i', path.join(dir, 'cred'), '-o', path.join(dir, 'secret'),
          ...(policy ? ['-P', `session:${session}`] : []),
        ]);
      } finally {
        if (policy) await this.tool('tpm2_flushcontext', [session]).catch(() => undefined);
        await this.flush().catch(() => undefined);
      }
      return fs.readFile(path.join(dir, 'secret'));
    });
  }

  async pcrExtend(index: number, sha256: Buffer): Promise<void> {
    await this.inTemp(() => this.tool('tpm2_pcrextend', [`${index}:sha256=${sha256.toString('hex')}`]));
  }

  /** Resets a PCR that locality 0 may reset (16 and 23, PC Client PFP §2.3.4). */
  async pcrReset(index: number): Promise<void> {
    await this.inTemp(() => this.tool('tpm2_pcrreset', [String(index)]));
  }

  /** Current sha256 PCR values. */
  async pcrRead(indices: number[]): Promise<Map<number, Buffer>> {
    return this.inTemp(async (dir) => {
      const sorted = [...indices].sort((a, b) => a - b);
      await this.tool('tpm2_pcrread', [`sha256:${sorted.join(',')}`, '-o', path.join(dir, 'pcrs')]);
      const raw = await fs.readFile(path.join(dir, 'pcrs'));
      return new Map(sorted.map((i, n) => [i, raw.subarray(n * 32, n * 32 + 32)]));
    });
  }

  /** TPM2_Quote over sha256 `indices` with `qualifyingData`: TPM2B_ATTEST ‖ TPMT_SIGNATURE. */
  async quote(indices: number[], qualifyingData: Buffer): Promise<Buffer> {
    return this.inTemp(async (dir) => {
      const sorted = [...indices].sort((a, b) => a - b);
      await this.tool('tpm2_quote', [
        '-c', hex(this.akHandle), '-l', `sha256:${sorted.join(',')}`, '-q', qualifyingData.toString('hex'),
        '-m', path.join(dir, 'msg'), '-s', path.join(dir, 'sig'), '-g', 'sha256',
      ]);
      await this.flush();
      const msg = await fs.readFile(path.join(dir, 'msg'));
      const sig = await fs.readFile(path.join(dir, 'sig'));
      const size = Buffer.alloc(2);
      size.writeUInt16BE(msg.length);
      return Buffer.concat([size, msg, sig]);
    });
  }
}
