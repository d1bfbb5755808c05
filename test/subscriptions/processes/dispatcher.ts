/**
 * A server process reduced to its delivery loop, for tests that kill it: the project's own
 * dispatcher on the PostgreSQL schema the test names. Env: DATABASE_URL, GUARD_KEY_SECRET,
 * TERMINUS_TEST_SCHEMA, TERMINUS_TEST_LEASE_MS (how long its claims keep the others off),
 * TERMINUS_TEST_LOG_LEVEL (silent unless given).
 */
import { loadConfig } from '../../../src/config';
import { createLogger } from '../../../src/logger';
import { openDb } from '../../../src/store/db';
import { composeParts } from '../../../src/app';

async function main(): Promise<void> {
  const config = loadConfig({ LOG_LEVEL: process.env.TERMINUS_TEST_LOG_LEVEL ?? 'silent', DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', PUBLIC_URL: 'http://localhost:8080', DATABASE_URL: process.env.DATABASE_URL, GUARD_KEY_SECRET: process.env.GUARD_KEY_SECRET });
  const db = await openDb({ databaseUrl: config.databaseUrl, schema: process.env.TERMINUS_TEST_SCHEMA, poolSize: 4 });
  const ctx = { config, db, logger: createLogger(config.logLevel), now: () => new Date() };
  // A long request timeout: the test kills this process while its POST waits for an answer.
  composeParts(ctx).subscriptions.start({ pollMs: 50, backoffMs: 50, timeoutMs: 30_000, maxTimeoutMs: 30_000, leaseMs: Number(process.env.TERMINUS_TEST_LEASE_MS) });
  process.on('SIGTERM', () => process.exit(0));
  setInterval(() => undefined, 60_000);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
