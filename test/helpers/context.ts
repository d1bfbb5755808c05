import crypto from 'node:crypto';
import { loadConfig, type Config } from '../../src/config';
import type { AppContext } from '../../src/context';
import { createLogger } from '../../src/logger';
import { openDb, openPglite, type Db } from '../../src/store/db';
import { migrate } from '../../src/store/migrate';

export interface TestContextOptions {
  /** Force the embedded PGlite store even when DATABASE_URL is set. */
  pglite?: boolean;
  /** Share a store with another context (two app instances, one database). */
  db?: Db;
  /**
   * Environment overrides. GUARD_ENFORCEMENT defaults to `off` here, so tests of the FHIR layer
   * call /fhir without tokens; tests of the enforcement point pass `GUARD_ENFORCEMENT: 'on'`
   * (test/guard/pep/helpers.ts does).
   */
  env?: Record<string, string>;
}

/**
 * A context on a fresh store: PostgreSQL (DATABASE_URL, a schema of its own per call) or PGlite in
 * memory. The returned `now` can be moved by tests through `clock`.
 */
export async function createTestContext(opts: TestContextOptions = {}): Promise<AppContext & { clock: TestClock }> {
  // METRICS_PORT 0: parallel test servers would all want 9464.
  const env: Record<string, string> = { LOG_LEVEL: 'silent', DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', METRICS_PORT: '0', ...opts.env };
  const config: Config = loadConfig({ ...env, PUBLIC_URL: env.PUBLIC_URL ?? 'http://localhost:8080' });
  let db = opts.db;
  if (!db) {
    const databaseUrl = opts.pglite ? undefined : process.env.DATABASE_URL;
    db = databaseUrl
      ? await openDb({ databaseUrl, schema: `t_${crypto.randomBytes(6).toString('hex')}`, poolSize: 60 })
      : await openPglite();
    await migrate(db);
  }
  const clock = new TestClock();
  return { config: { ...config, databaseUrl: opts.pglite ? undefined : process.env.DATABASE_URL }, db, logger: createLogger(config.logLevel), now: () => clock.now(), clock };
}

/** Real time plus an offset that tests can advance. */
export class TestClock {
  private offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
