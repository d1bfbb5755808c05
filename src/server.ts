import http from 'node:http';
import { Redis } from 'ioredis';
import type { AddressInfo } from 'node:net';
import { createApp } from './app';
import type { Config } from './config';
import type { AppContext } from './context';
import { createLogger, type Logger } from './logger';
import { openDb, type Db } from './store/db';
import { migrate } from './store/migrate';
import { fhirEnv } from './fhir';
import { preloadValidation } from './fhir/validation';
import { demoResources } from './store/demo';
import { startSubscriptions, stopSubscriptions } from './subscriptions';
import { startJobs, stopJobs } from './jobs';

export interface RunningServer {
  ctx: AppContext;
  url: string;
  http: http.Server;
  close(): Promise<void>;
}

/** Opens the store, applies migrations, and builds the context every part is composed from. */
export async function createContext(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<AppContext> {
  const db: Db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrate(db);
  const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: null }) : undefined;
  return { config, db, logger, redis, now: () => new Date() };
}

/** Serves the app; close() stops accepting, lets in-flight requests finish, then closes the store. */
export async function startServer(config: Config, ctx?: AppContext): Promise<RunningServer> {
  const context = ctx ?? (await createContext(config));
  // Index the R4 definitions now rather than on the first write (about a second).
  preloadValidation();
  if (config.demoData) await loadDemoData(context);
  const app = createApp(context);
  const server = http.createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  // Every replica works the job queue and sweeps up jobs a crashed replica left behind.
  await startJobs(context);
  startSubscriptions(context);
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.host}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    ctx: context,
    url,
    http: server,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await stopSubscriptions(context);
        await stopJobs(context);
        await context.db.close();
        context.redis?.disconnect();
      })();
      return closing;
    },
  };
}

/** Demo calendars on first start: only into an empty store, so a restart never duplicates them. */
export async function loadDemoData(ctx: AppContext): Promise<void> {
  const { rows } = await ctx.db.query('SELECT 1 FROM resource LIMIT 1');
  if (rows.length > 0) return;
  // The demo set is validated by its own tests (test/store/demo.test.ts); bulk loading keeps the
  // first start fast on PGlite.
  const resources = demoResources(ctx.now());
  await fhirEnv(ctx).repo.bulkLoad(resources);
  ctx.logger.info({ resources: resources.length }, 'demo data loaded into the empty store');
}
