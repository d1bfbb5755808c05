import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A manufactured software TPM (swtpm) with EK certificates from a private swtpm-localca. */
export interface SoftwareTpm {
  dir: string;
  tcti: string;
  /** PEM of the EK CA: the local CA's root and its issuer certificate. */
  ekCaPem: string;
  stop(): Promise<void>;
  /** Starts the simulator again on the same state (a TPM restart). */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** A loopback port that is free, and its successor too (swtpm uses port and port + 1). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    // swtpm needs port and port + 1.
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port + 1, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok && port < 65000) return port;
  }
}

/**
 * Manufactures a TPM in a fresh folder (RSA-2048 EK at 0x81010001 and a P-384 EK at 0x81010016, each
 * with a certificate in NV) and serves it on loopback. `ca` reuses another TPM's CA folder (the same
 * manufacturer); by default each TPM has its own CA.
 */
export async function startSoftwareTpm(o: { ca?: string } = {}): Promise<SoftwareTpm> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'terminus-swtpm-'));
  const ca = o.ca ?? path.join(dir, 'ca');
  await fs.mkdir(path.join(dir, 'state'), { recursive: true });
  await fs.mkdir(ca, { recursive: true });
  await fs.writeFile(
    path.join(dir, 'swtpm-localca.conf'),
    `statedir = ${ca}\nsigningkey = ${ca}/signkey.pem\nissuercert = ${ca}/issuercert.pem\ncertserial = ${ca}/certserial\n`,
  );
  await fs.writeFile(path.join(dir, 'swtpm-localca.options'), '--platform-manufacturer Test\n--platform-version 2.1\n--platform-model Test\n');
  await fs.writeFile(
    path.join(dir, 'swtpm_setup.conf'),
    `create_certs_tool = /usr/bin/swtpm_localca\ncreate_certs_tool_config = ${dir}/swtpm-localca.conf\ncreate_certs_tool_options = ${dir}/swtpm-localca.options\nactive_pcr_banks = sha256\n`,
  );
  await run('swtpm_setup', ['--tpm2', '--tpmstate', path.join(dir, 'state'), '--config', path.join(dir, 'swtpm_setup.conf'), '--create-ek-cert', '--lock-nvram', '--overwrite', '--pcr-banks', 'sha256'], { timeout: 120_000 });
  const ekCaPem = (await fs.readFile(path.join(ca, 'swtpm-localca-rootca-cert.pem'), 'utf8')) + (await fs.readFile(path.join(ca, 'issuercert.pem'), 'utf8'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('swtpm', ['socket', '--tpm2', '--tpmstate', `dir=${path.join(dir, 'state')}`, '--server', `type=tcp,port=${port},bindaddr=127.0.0.1`, '--ctrl', `type=tcp,port=${port + 1},bindaddr=127.0.0.1`, '--flags', 'not-need-init,startup-clear'], { stdio: 'ignore' });
    for (let i = 0; i < 200; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      });
      if (up) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('swtpm did not start');
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGTERM');
    });
  };
  await start();
  return {
    dir,
    tcti: `swtpm:host=127.0.0.1,port=${port}`,
    ekCaPem,
    start,
    stop,
    async close() {
      await stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}
