import { spawn } from 'node:child_process';
import { freePort } from './swtpm';

/** A real `openssl ocsp` responder on loopback over an `openssl ca` index file. */
export interface OcspResponder {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts `openssl ocsp` and waits for its "waiting for OCSP client connections" line (a TCP probe
 * would block it: the responder serves one connection at a time and waits for a request on it).
 */
export async function startOcspResponder(o: {
  index: string;
  caCert: string;
  signerCert: string;
  signerKey: string;
  port?: number;
  /** The answers' nextUpdate in minutes from now (default: a day). */
  nextUpdateMinutes?: number;
}): Promise<OcspResponder> {
  const port = o.port ?? (await freePort());
  const child = spawn(
    'openssl',
    ['ocsp', '-index', o.index, '-CA', o.caCert, '-rsigner', o.signerCert, '-rkey', o.signerKey, '-port', String(port), ...(o.nextUpdateMinutes ? ['-nmin', String(o.nextUpdateMinutes)] : ['-ndays', '1']), '-timeout', '5'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`openssl ocsp did not start: ${seen}`)), 30_000);
    child.stderr.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (process.env.OCSP_DEBUG) process.stderr.write(chunk);
      if (seen.includes('waiting for OCSP client connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`openssl ocsp exited with ${code}: ${seen}`));
    });
  }).catch((err) => {
    child.kill('SIGKILL');
    throw err;
  });
  child.stderr.resume();
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
    },
  };
}
