import http from 'node:http';
import https from 'node:https';
import { Redis, type RedisOptions } from 'ioredis';
import type { AddressInfo } from 'node:net';
import { composeTerminus, type Terminus } from './app';
import { ConfigError, fhirBaseUrl, type Config } from './config';
import type { AppContext } from './context';
import { createLogger, type Logger } from './logger';
import { DataDirInUse, migrate, openDb, openTables, preloadSearchParameters, ReplicaSet, Repository, type Db, type SharedWriteMarks } from './store';
import { issue, outcome } from './server-lib/outcomes';
import { API_VERSION, loadPolicyData } from './guard';
import { preloadValidation } from './model';
import { metricsAddressIsFree, startMetricsListener } from './metrics-listener';
import { withTimeout } from './server-lib/timeout';
import { startWorkloadSocket, workloadSocketWanted } from './workload-socket';
import { demoResources } from './demo';
import { readTlsCredentials, serverTls, TlsFilesUnusable, type ServerTls } from './tls';

export interface RunningServer {
  ctx: AppContext;
  /** `https://…` when TLS_CERT_FILE is set, else `http://…`. */
  url: string;
  http: http.Server | https.Server;
  /** The server's TLS (the certificate files followed, the stapled OCSP answer), when it speaks TLS. */
  tls?: ServerTls;
  /** The Prometheus listener (METRICS_PORT), unless switched off. */
  metricsUrl?: string;
  close(): Promise<void>;
}

/**
 * Opens the store, applies migrations, and builds the context every part is composed from. A
 * store or Redis that cannot be reached is a ConfigError naming DATABASE_URL / DATA_DIR /
 * REDIS_URL; whatever was opened before the failure is closed again.
 */
export async function createContext(config: Config, logger: Logger = createLogger(config.logLevel, config.logFormat)): Promise<AppContext> {
  const db = await openStore(config);
  try {
    const redis = config.redisUrl ? await connectRedis(config.redisUrl, logger) : undefined;
    if (redis && db.reads instanceof ReplicaSet) db.reads.shareWriteMarks(redisWriteMarks(redis));
    return { config, db, logger, redis, now: () => new Date() };
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

/** The store of DATABASE_URL (or PGlite in DATA_DIR, locked for this process) with migrations applied. */
export async function openStore(config: Config): Promise<Db & { applied: string[] }> {
  const variable = config.databaseUrl ? 'DATABASE_URL' : 'DATA_DIR';
  const where = config.databaseUrl ? redactUrl(config.databaseUrl) : config.dataDir;
  let db: Db;
  try {
    db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: config.dbPoolSize, idleTimeoutSec: config.dbIdleTimeoutSec });
  } catch (err) {
    if (err instanceof DataDirInUse) throw new ConfigError('DATA_DIR', err.message);
    throw new ConfigError(variable, `cannot open the store at ${where}: ${errorText(err)}`);
  }
  try {
    // pg connects lazily, and a host that drops packets never refuses: bound the first answer.
    await withTimeout(db.query('SELECT 1'), STORE_CONNECT_TIMEOUT_MS, `no answer within ${STORE_CONNECT_TIMEOUT_MS / 1000} s`);
    const applied = await migrate(db);
    // Replicas that cannot be reached now are left out (the primary serves) until a look finds them.
    if (config.databaseReadUrls.length > 0) {
      db.reads = await ReplicaSet.open(db, config.databaseReadUrls, { maxLagMs: config.databaseReadMaxLagMs, poolSize: config.dbPoolSize, idleTimeoutSec: config.dbIdleTimeoutSec, names: config.databaseReadUrls.map(redactUrl) });
    }
    return Object.assign(db, { applied });
  } catch (err) {
    await withTimeout(db.close(), SHUTDOWN_STEP_MS, 'close').catch(() => undefined);
    throw new ConfigError(variable, `cannot use the store at ${where}: ${errorText(err)}`);
  }
}

const STORE_CONNECT_TIMEOUT_MS = 15_000;

/** A Redis command the guard sends may take this long before its request fails (503). */
const REDIS_COMMAND_TIMEOUT_MS = 2000;
const REDIS_CONNECT_TIMEOUT_MS = 5000;

/**
 * The shared connection for guard state and rate limits fails fast while Redis is away (no
 * offline queue, one retry, a command timeout): the request gets a 503 instead of waiting
 * forever. BullMQ's connections are duplicates of it and need the opposite (blocking commands,
 * an offline queue, maxRetriesPerRequest null), so duplicate() starts from those options.
 * Start-up refuses a Redis it cannot reach; /readyz reports one that goes away later.
 */
export async function connectRedis(url: string, logger: Logger): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  });
  const queueOptions: RedisOptions = { enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, lazyConnect: false };
  // BullMQ duplicates its copies again (the worker's blocking connection): track them all.
  const duplicates: Redis[] = [];
  const tracked = (from: Redis, base: Partial<RedisOptions>) => {
    from.duplicate = (override?: Partial<RedisOptions>) => {
      const copy = new Redis({ ...from.options, ...base, ...override });
      duplicates.push(tracked(copy, {}));
      return copy;
    };
    return from;
  };
  tracked(redis, queueOptions);
  // Closing the shared connection closes BullMQ's copies too (BullMQ cannot while Redis is gone).
  const disconnect = redis.disconnect.bind(redis);
  redis.disconnect = (reconnect?: boolean) => {
    if (!reconnect) for (const copy of duplicates) copy.disconnect();
    disconnect(reconnect);
  };
  // One line per change of state, not one per reconnect attempt.
  let reachable = true;
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => {
    lastError = err;
    if (!reachable) return;
    reachable = false;
    logger.error({ err: errorText(err) }, 'redis unreachable: guard requests answer 503 and /readyz fails until it is back');
  });
  redis.on('ready', () => {
    if (reachable) return;
    reachable = true;
    logger.info('redis reachable again');
  });
  try {
    await withTimeout(
      redis.connect().then(() => redis.ping()),
      REDIS_CONNECT_TIMEOUT_MS,
      `no answer within ${REDIS_CONNECT_TIMEOUT_MS / 1000} s`,
    );
    return redis;
  } catch (err) {
    redis.disconnect();
    // connect() rejects with "Connection is closed."; the socket's error says why.
    throw new ConfigError('REDIS_URL', `cannot reach ${redactUrl(url)}: ${errorText(lastError ?? err)}`);
  }
}

/**
 * Serves the app; close() stops accepting, lets in-flight requests finish, then closes the store.
 * A failing start closes what it opened (the store and Redis when it created the context) and
 * rejects with a ConfigError naming the variable where one is to blame (HOST, PORT, ...).
 */
export interface StartOptions {
  /**
   * Serve `terminus workload-token` on DATA_DIR/terminus.sock where the command cannot mint with
   * this server's key by itself (workload-socket.ts): `terminus serve` does.
   */
  workloadSocket?: boolean;
}

export async function startServer(config: Config, ctx?: AppContext, options: StartOptions = {}): Promise<RunningServer> {
  // A POLICY_FILE of the wrong shape, or a HOST, PORT or METRICS_PORT that cannot be had, fails the
  // start at once, before the store is opened and migrated (the guard loads the policy again when
  // it is composed; the listeners bind again once the app is ready).
  loadPolicyData(config.policyFile);
  if (config.tls) tlsFilesServe(config.tls);
  await addressIsFree(config);
  await metricsAddressIsFree(config);
  const context = ctx ?? (await createContext(config));
  let server: http.Server | https.Server | undefined;
  let tls: ServerTls | undefined;
  let metrics: http.Server | undefined;
  let socket: http.Server | undefined;
  let terminus: Terminus | undefined;
  let started = false;
  try {
    // Index the R4 definitions and the search parameters now rather than on the first write or
    // search (a second or more each): the first request of a process is as fast as any, and
    // /readyz answers only once they are there (the server listens after this).
    preloadValidation();
    preloadSearchParameters();
    if (config.demoData) await loadDemoData(context);
    await openTables(context.db);
    terminus = composeTerminus(context);
    await terminus.warmUp();
    tls = config.tls ? await startTls(config.tls, context) : undefined;
    server = tls ? https.createServer(tls.options, terminus.app) : http.createServer(terminus.app);
    tls?.attach(server as https.Server);
    answerClientErrors(server);
    await listen(server, config);
    metrics = await startMetricsListener(config, context);
    if (options.workloadSocket && workloadSocketWanted(config)) socket = await startWorkloadSocket(config, context);
    // Every replica works the job queue and sweeps up jobs a crashed replica left behind.
    started = true;
    await terminus.start();
  } catch (err) {
    tls?.stop();
    server?.close();
    metrics?.close();
    socket?.close();
    if (started && terminus) await withTimeout(terminus.stop(), SHUTDOWN_STEP_MS, 'jobs did not stop').catch(() => undefined);
    if (!ctx) await closeContext(context);
    throw err;
  }
  const listening = server;
  const running = terminus;
  const { port } = listening.address() as AddressInfo;
  const url = `${tls ? 'https' : 'http'}://${config.host}:${port}`;
  const metricsAddress = metrics?.address() as AddressInfo | undefined;
  let closing: Promise<void> | undefined;
  return {
    ctx: context,
    url,
    http: listening,
    tls,
    metricsUrl: metricsAddress ? `http://${config.metricsHost}:${metricsAddress.port}/metrics` : undefined,
    close() {
      closing ??= (async () => {
        tls?.stop();
        socket?.close();
        metrics?.close();
        metrics?.closeAllConnections();
        await new Promise<void>((resolve) => {
          listening.close(() => resolve());
          listening.closeIdleConnections();
        });
        // With Redis gone, BullMQ waits for it forever: shutdown must still complete.
        await withTimeout(running.subscriptions.stop(), SHUTDOWN_STEP_MS, 'subscriptions did not stop').catch((err) => context.logger.warn({ err: errorText(err) }, 'shutdown'));
        await withTimeout(running.jobs.stop(), SHUTDOWN_STEP_MS, 'jobs did not stop').catch((err) => context.logger.warn({ err: errorText(err) }, 'shutdown'));
        await closeContext(context);
      })();
      return closing;
    },
  };
}

const SHUTDOWN_STEP_MS = 5000;

/** TLS files that cannot serve stop the start, naming the variable, before the store is opened. */
function tlsFilesServe(settings: NonNullable<Config['tls']>): void {
  try {
    readTlsCredentials(settings.certFile, settings.keyFile);
  } catch (err) {
    if (err instanceof TlsFilesUnusable) throw new ConfigError(err.variable, err.message);
    throw err;
  }
}

/** The TLS files as the server starts, and the first OCSP answer (fetched before the server listens). */
async function startTls(settings: NonNullable<Config['tls']>, ctx: AppContext): Promise<ServerTls> {
  tlsFilesServe(settings);
  return serverTls(settings, ctx.logger, ctx.now);
}

/** Closes the store and drops Redis (disconnect, not quit: quit waits for a Redis that may be gone). */
async function closeContext(ctx: AppContext): Promise<void> {
  ctx.redis?.disconnect();
  await ctx.db.close().catch((err) => ctx.logger.warn({ err: errorText(err) }, 'closing the store failed'));
}

/**
 * Binds HOST:PORT and lets go again. The server itself listens only once it is ready (/readyz), after
 * seconds of start-up work; this tells an operator at once. Another process may still take the port
 * in between: then the listen itself fails with the same message.
 */
async function addressIsFree(config: Config): Promise<void> {
  const probe = http.createServer();
  await listen(probe, config);
  await new Promise((resolve) => probe.close(resolve));
}

/** Listen errors name the variable to change: an unknown or foreign HOST, a taken or privileged PORT. */
function listen(server: http.Server, config: Config): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const at = `${config.host}:${config.port}`;
      if (err.code === 'EADDRINUSE') return reject(new ConfigError('PORT', `${at} is already in use by another process`));
      if (err.code === 'EACCES') return reject(new ConfigError('PORT', `no permission to listen on ${at}`));
      if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN' || err.code === 'EADDRNOTAVAIL' || err.code === 'EAI_NONAME') {
        return reject(new ConfigError('HOST', `cannot listen on "${config.host}": not an address of this machine (${err.code})`));
      }
      reject(err);
    });
    server.listen(config.port, config.host, () => resolve());
  });
}

/**
 * A writer's last write, known to every replica of the application for as long as it matters
 * (the key expires with the allowed replica lag).
 */
function redisWriteMarks(redis: Redis): SharedWriteMarks {
  const key = (writer: string) => `terminus:last-write:${writer}`;
  return {
    async mark(writer, atMs, ttlMs) {
      await redis.set(key(writer), String(atMs), 'PX', ttlMs);
    },
    async lastWrite(writer) {
      const v = await redis.get(key(writer));
      return v === null ? undefined : Number(v);
    },
  };
}

/** A connection URL without its password, for messages. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** Node's AggregateError (connect to every address of a name failed) has an empty message. */
function errorText(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return errorText(err.errors[0]);
  if (err instanceof Error) return err.message || (err as NodeJS.ErrnoException).code || err.name;
  return String(err);
}

/**
 * What Node refuses before the app sees a request (request line plus headers over
 * --max-http-header-size, 16 KB by default; a malformed request line) gets an OperationOutcome
 * instead of Node's bare status line (coded errors, SVC-API-Version everywhere).
 * A search too long for a URL belongs in `POST [type]/_search`.
 */
export function answerClientErrors(server: http.Server | https.Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const diagnostics = tooLarge
      ? 'Request line and headers are too large: send long searches as POST [type]/_search with a form body'
      : 'Malformed HTTP request';
    const body = JSON.stringify(outcome([issue(tooLarge ? 'too-costly' : 'structure', diagnostics)]));
    // The answer to HEAD has no body (RFC 9110 9.3.2), even when the rest of the request was unreadable.
    const head = (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ';
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n` +
        'Content-Type: application/fhir+json; charset=UTF-8\r\n' +
        `SVC-API-Version: ${API_VERSION}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        (head ? '' : body),
    );
  });
}

/** Demo calendars on first start: only into an empty store, so a restart never duplicates them. */
async function loadDemoData(ctx: AppContext): Promise<void> {
  const repo = new Repository(ctx.db, fhirBaseUrl(ctx.config), ctx.now);
  if (!(await repo.isEmpty())) return;
  // The demo set is validated by its own tests (test/demo/demo.test.ts); bulk loading keeps the
  // first start fast on PGlite.
  const resources = demoResources(ctx.now());
  await repo.bulkLoad(resources);
  ctx.logger.info({ resources: resources.length }, 'demo data loaded into the empty store');
}
