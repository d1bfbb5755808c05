/**
 * The attestation helper of a stationary client (docs/requirements.md#attestation-helper-grpc): a
 * gRPC service over the TPM, started by `terminus-client attestation-helper`, and the client side
 * the reference client uses.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HelperEventLog, measurePath } from './measurement';
import { createHelperServer, helperCredentials } from './server';
import { TpmTools, type EkKind } from './tpm-tools';

export { AttestationHelperClient, HelperCallError } from './client';
export { STATUS, STATUS_TRAILER, type AttestationStatus, type GetAttestationResponse, type RegistrationMaterial } from './proto';
export { ALLOWED_PCRS } from './server';
export { TpmCommandError, TpmTools, AK_HANDLE, type EkKind } from './tpm-tools';

export interface AttestationHelperOptions {
  /** host:port; loopback unless told otherwise. */
  listen: string;
  tlsCert: string;
  tlsKey: string;
  tlsClientCa: string;
  allowedClientCns?: string[];
  /** TPM2TOOLS_TCTI. */
  tcti: string;
  ek?: EkKind;
  baselineFile?: string;
  /** The platform's firmware event log, if the machine has one. */
  eventLogFile?: string;
  /** Where the helper keeps its own PCR 23 events across restarts. */
  stateDir: string;
  /** What is measured into PCR 23 at start (default: the code folder the helper runs from). */
  measure?: string;
}

export interface RunningHelper {
  /** host:port actually bound. */
  address: string;
  /** The measurement extended into PCR 23 at this start. */
  measurement: Buffer;
  close(): Promise<void>;
}

/**
 * Starts the helper: the AK persistent at its handle (created under the EK the first time), the
 * event log recovered, the package measured into PCR 23, then the gRPC services on `listen`.
 */
export async function startAttestationHelper(o: AttestationHelperOptions): Promise<RunningHelper> {
  const [cert, key, clientCa] = await Promise.all([fs.readFile(o.tlsCert), fs.readFile(o.tlsKey), fs.readFile(o.tlsClientCa)]);
  const tpm = new TpmTools(o.tcti, o.ek ?? 'rsa');
  await tpm.ensureAk();
  const log = await HelperEventLog.open(tpm, path.join(o.stateDir, 'pcr23-events.bin'), o.eventLogFile);
  const target = o.measure ?? path.resolve(__dirname, '..');
  const measurement = await measurePath(target);
  await log.measure(measurement, `terminus-client ${await packageVersion()} ${path.basename(target)} sha256:${measurement.toString('hex')}`);
  const tls = { cert, key, clientCa };
  const server = createHelperServer({ tpm, log, tls, allowedClientCns: o.allowedClientCns ?? [], baselineFile: o.baselineFile });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync(o.listen, helperCredentials(tls), (err, p) => (err ? reject(err) : resolve(p))));
  // The certificates reach the TLS server one event-loop turn after binding (helperCredentials).
  await new Promise((resolve) => setImmediate(resolve));
  const host = o.listen.slice(0, o.listen.lastIndexOf(':'));
  return {
    address: `${host}:${port}`,
    measurement,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5_000).unref();
      }),
  };
}

async function packageVersion(): Promise<string> {
  let dir = __dirname;
  for (;;) {
    const pkg = await fs.readFile(path.join(dir, 'package.json'), 'utf8').catch(() => undefined);
    if (pkg) return (JSON.parse(pkg) as { version?: string }).version ?? '0.0.0';
    const parent = path.dirname(dir);
    if (parent === dir) return '0.0.0';
    dir = parent;
  }
}

export { grpc };
