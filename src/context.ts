import type { Redis } from 'ioredis';
import type { Config } from './config';
import type { Logger } from './logger';
import type { Db } from './store/db';

/** What every part gets from app.ts: configuration, the store, the log and the clock. */
export interface AppContext {
  config: Config;
  db: Db;
  logger: Logger;
  /** Shared Redis connection when REDIS_URL is set (queues, rate limits, replay caches). */
  redis?: Redis;
  /** Injectable clock (tests move time); never call Date.now() for protocol decisions elsewhere. */
  now: () => Date;
}
