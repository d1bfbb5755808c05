import { ConfigError, type Config } from '../config';
import { createLogger } from '../logger';
import { guardSettings, InvalidWorkloadRequest, issueWorkloadToken, MAX_WORKLOAD_TOKEN_TTL_SEC, SigningKeys } from '../guard';
import { openStore } from '../server';
import { askServerForWorkloadToken, workloadSocketPath, WorkloadSocketError, type WorkloadTokenRequest } from '../workload-socket';

const USAGE = `terminus: workload-token needs --sub SUBJECT and --aud AUDIENCE (the other guard's token endpoint or issuer); --ttl 1 to ${MAX_WORKLOAD_TOKEN_TTL_SEC} seconds (default 300)`;

/**
 * `terminus workload-token --sub S --aud A [--aud A2] [--ttl N]`: a workload token of this guard
 * for another guard to exchange (RFC 8693 subject token), signed with the guard's current signing
 * key, so the key is the one jwks_uri already publishes and the key set does not grow per call.
 * A server of this DATA_DIR mints it (workload-socket.ts); without one the command opens the store
 * itself, where it can open the guard's keys: the embedded store, or PostgreSQL with
 * GUARD_KEY_SECRET.
 */
export async function runWorkloadToken(config: Config, args: string[]): Promise<number> {
  const request = parseArgs(args);
  if (!request) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let token: string | undefined;
  try {
    token = (await askServerForWorkloadToken(config, request)) ?? (await mintHere(config, request));
  } catch (err) {
    if (!(err instanceof WorkloadSocketError || err instanceof InvalidWorkloadRequest)) throw err;
    process.stderr.write(`terminus: workload-token: ${err.message}\n`);
    return 2;
  }
  process.stdout.write(`${token}\n`);
  return 0;
}

function parseArgs(args: string[]): WorkloadTokenRequest | undefined {
  const values = (name: string) => args.flatMap((a, i) => (a === name && args[i + 1] !== undefined ? [args[i + 1]] : []));
  const sub = values('--sub')[0];
  const aud = values('--aud');
  const ttlSec = Number(values('--ttl')[0] ?? '300');
  if (!sub || aud.length === 0 || !(Number.isInteger(ttlSec) && ttlSec > 0 && ttlSec <= MAX_WORKLOAD_TOKEN_TTL_SEC)) return undefined;
  return { sub, aud, ttlSec };
}

/** No server of this DATA_DIR answered: sign in this process with the guard's current key. */
async function mintHere(config: Config, request: WorkloadTokenRequest): Promise<string> {
  if (config.databaseUrl && !config.guardKeySecret) {
    // The servers seal their keys with a key of each process: this one could open none of them and
    // would add a key of its own to jwks_uri on every call.
    throw new ConfigError(
      'GUARD_KEY_SECRET',
      `unset, and no server answered on ${workloadSocketPath(config)}: set it to the servers' value, or run the command on a server's machine with its DATA_DIR`,
    );
  }
  const db = await openStore(config).catch((err: unknown) => {
    // The embedded store is held by a server that does not answer on the socket (yet).
    if (err instanceof ConfigError && err.variable === 'DATA_DIR' && /in use by process/.test(err.message)) {
      throw new ConfigError('DATA_DIR', `${err.message.replace(/^DATA_DIR: /, '')} (a running server), which did not answer on ${workloadSocketPath(config)}: retry once it logs "terminus listening"`);
    }
    throw err;
  });
  try {
    const ctx = { config, db, logger: createLogger('silent'), now: () => new Date() };
    const settings = guardSettings(config);
    return await issueWorkloadToken(new SigningKeys(ctx, settings), settings, ctx.now(), request);
  } finally {
    await db.close();
  }
}
