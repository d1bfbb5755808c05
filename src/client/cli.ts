#!/usr/bin/env node
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { addCommands, processIo, report, type CliIo } from './cli-commands';

/**
 * `terminus-client`: the reference client's command line (docs/requirements.md#reference-client-and-sdk).
 * Exit codes: 0 success, 1 the server refused, 2 usage or local error.
 */
export function program(io: CliIo = processIo()): Command {
  const cli = new Command('terminus-client')
    .description('reference client of a Terminus appointment repository behind its access guard')
    .version(version(), '--version')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) });

  addCommands(cli, io);
  cli
    .command('attestation-helper')
    .description('serve the gRPC attestation helper over the TPM; TPM via TPM2TOOLS_TCTI')
    .requiredOption('--listen <addr>', 'host:port to listen on', '127.0.0.1:50051')
    .requiredOption('--tls-cert <file>', 'PEM server certificate (chain)')
    .requiredOption('--tls-key <file>', 'PEM key of the server certificate')
    .requiredOption('--tls-client-ca <file>', 'PEM CA certificates whose client certificates may call')
    .option('--allowed-client-cn <cn...>', 'client certificate CNs that may call (default: any trusted certificate)')
    .option('--baseline <file>', 'JSON object PCR index -> hex value; differing PCRs answer BASELINE_MISMATCH')
    .option('--event-log <file>', 'the platform firmware event log', firmwareLog())
    .option('--ek <kind>', 'endorsement key: rsa or ecc384', ekKind, 'rsa')
    .option('--state-dir <dir>', 'where the helper keeps its PCR 23 events', path.join(home(), 'attestation-helper'))
    .action(async (o: Record<string, string | string[] | undefined>) => {
      const tcti = process.env.TPM2TOOLS_TCTI;
      if (!tcti) throw new UsageError('TPM2TOOLS_TCTI must name the TPM (for example device:/dev/tpmrm0 or swtpm:host=127.0.0.1,port=2321)');
      const { startAttestationHelper } = await import('../attestation-helper');
      const helper = await startAttestationHelper({
        listen: o.listen as string,
        tlsCert: o.tlsCert as string,
        tlsKey: o.tlsKey as string,
        tlsClientCa: o.tlsClientCa as string,
        allowedClientCns: (o.allowedClientCn as string[] | undefined) ?? [],
        tcti,
        ek: o.ek as 'rsa' | 'ecc384',
        baselineFile: o.baseline as string | undefined,
        eventLogFile: o.eventLog as string | undefined,
        stateDir: o.stateDir as string,
      });
      io.out(`${JSON.stringify({ listening: helper.address, pcr23_measurement: helper.measurement.toString('hex') })}\n`);
      await new Promise<void>((resolve) => {
        const stop = () => helper.close().then(resolve, resolve);
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
  return cli;
}

class UsageError extends Error {}

function ekKind(v: string): string {
  if (v !== 'rsa' && v !== 'ecc384') throw new InvalidArgumentError('rsa or ecc384');
  return v;
}

function home(): string {
  return process.env.TERMINUS_CLIENT_HOME ?? path.join(os.homedir(), '.terminus-client');
}

/** The kernel's copy of the firmware log, when this machine has one we may read. */
function firmwareLog(): string | undefined {
  const p = '/sys/kernel/security/tpm0/binary_bios_measurements';
  try {
    fs.accessSync(p, fs.constants.R_OK);
    return p;
  } catch {
    return undefined;
  }
}

function version(): string {
  try {
    return (require(path.join(__dirname, '..', '..', 'package.json')) as { version: string }).version;
  } catch {
    return (require(path.join(__dirname, '..', '..', '..', 'package.json')) as { version: string }).version;
  }
}

/** Runs one command line; `io` is the process's streams, or a test's (with `isTTY` of its choice). */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  try {
    await program(io).parseAsync(argv, { from: 'user' });
    return io.exitCode ?? 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof UsageError) {
      io.err(`terminus-client: ${err.message}\n`);
      return 2;
    }
    return report(err, io);
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
