import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config';
import type { AppContext } from '../../src/context';
import { createLogger } from '../../src/logger';
import { openDb, openPglite, openPgliteFromImage, pgliteImage, type Db } from '../../src/store/db';
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
      : await freshPglite();
    await migrate(db);
  }
  const clock = new TestClock();
  return { config: { ...config, databaseUrl: opts.pglite ? undefined : process.env.DATABASE_URL }, db, logger: createLogger(config.logLevel), now: () => clock.now(), clock };
}

const ROOT = path.join(__dirname, '..', '..');

/**
 * A new embedded store: PGlite in memory started from an image of a migrated one instead of initdb
 * and the migrations (3-5 s of CPU each, about 1 s from the image; the suite opens a few hundred).
 * The image is made by the first store of a migration set and PGlite version and kept in the temp
 * folder. A store from it gets its own job store identity, as a freshly migrated one would.
 */
async function freshPglite(): Promise<Db> {
  // Counted per test file for test/setup-cpu-times.ts.
  (globalThis as { terminusPgliteOpens?: number }).terminusPgliteOpens = ((globalThis as { terminusPgliteOpens?: number }).terminusPgliteOpens ?? 0) + 1;
  const file = imagePath();
  if (fs.existsSync(file)) {
    try {
      const db = await openPgliteFromImage(new Blob([fs.readFileSync(file)]));
      await db.query('UPDATE job_store_identity SET store_id = md5(random()::text || clock_timestamp()::text)');
      return db;
    } catch {
      fs.rmSync(file, { force: true }); // unreadable: made again below
    }
  }
  const db = await openPglite();
  await migrate(db);
  const image = Buffer.from(await (await pgliteImage(db)).arrayBuffer());
  const tmp = `${file}.${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  fs.writeFileSync(tmp, image);
  fs.renameSync(tmp, file); // atomic: a parallel worker reads a whole image or none
  removeOtherImages(file);
  return db;
}

/** Images of other migration sets or PGlite versions (42 MB each) are not used again. */
function removeOtherImages(kept: string): void {
  const dir = path.dirname(kept);
  for (const name of fs.readdirSync(dir)) {
    if (/^terminus-pglite-image-[0-9a-f]{16}\.tar$/.test(name) && path.join(dir, name) !== kept) fs.rmSync(path.join(dir, name), { force: true });
  }
}

/** Names what a migrated store holds: the PGlite version and the migration set. */
function templateKey(): string {
  const hash = crypto.createHash('sha256');
  hash.update(fs.readFileSync(path.join(ROOT, 'node_modules', '@electric-sql', 'pglite', 'package.json')));
  const dir = path.join(ROOT, 'migrations');
  for (const name of fs.readdirSync(dir).sort()) hash.update(name).update(fs.readFileSync(path.join(dir, name)));
  return hash.digest('hex').slice(0, 16);
}

function imagePath(): string {
  return path.join(os.tmpdir(), `terminus-pglite-image-${templateKey()}.tar`);
}

/**
 * A new DATA_DIR (under the temp folder, named `prefix…`) holding a migrated embedded store, for a
 * test that runs `terminus` on a DATA_DIR but is not about its first start: initdb and the
 * migrations into a directory cost about 10 s of CPU, a copy of a migrated one a few milliseconds.
 * The template is made once per migration set and PGlite version and kept in the temp folder. The
 * copies share the template's job store identity, which only names BullMQ's queues: a test that
 * starts servers on copies with one Redis must not use it.
 */
export async function migratedDataDir(prefix: string): Promise<string> {
  const template = path.join(os.tmpdir(), `terminus-pglite-datadir-${templateKey()}`);
  if (!fs.existsSync(path.join(template, 'pgdata'))) {
    const staging = fs.mkdtempSync(`${template}.staging-`);
    const db = await openPglite(staging);
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    try {
      fs.renameSync(staging, template); // atomic: a parallel worker sees a whole template or none
    } catch {
      fs.rmSync(staging, { recursive: true, force: true }); // another worker made it first
    }
    removeOtherDataDirs(template);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.cpSync(path.join(template, 'pgdata'), path.join(dir, 'pgdata'), { recursive: true });
  return dir;
}

/** Templates of other migration sets or PGlite versions are not used again. */
function removeOtherDataDirs(kept: string): void {
  const dir = path.dirname(kept);
  for (const name of fs.readdirSync(dir)) {
    if (/^terminus-pglite-datadir-[0-9a-f]{16}$/.test(name) && path.join(dir, name) !== kept) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  }
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
