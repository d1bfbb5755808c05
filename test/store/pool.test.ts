import crypto from 'node:crypto';
import request from 'supertest';
import { createApp } from '../../src/app';
import { metricsRegistry } from '../../src/server-lib/metrics';
import { migrate, openDb, StoreBusy, StoreUnavailable, type Db } from '../../src/store';
import { createTestContext } from '../helpers/context';
import { tcpRelay } from '../helpers/relay';

/**
 * The PostgreSQL pool's size and idle timeout are settings (DB_POOL_SIZE,
 * DB_IDLE_TIMEOUT_SECONDS): at most that many connections, and idle ones kept that long, so a
 * burst after a quiet spell finds its connections open.
 */
const pg = process.env.DATABASE_URL ? describe : describe.skip;

pg('PostgreSQL pool', () => {
  const dbs: Db[] = [];
  afterAll(() => Promise.all(dbs.map((db) => db.close())));
  const open = async (poolSize: number, idleTimeoutSec?: number) => {
    const db = await openDb({ databaseUrl: process.env.DATABASE_URL, poolSize, idleTimeoutSec });
    dbs.push(db);
    return db;
  };
  const burst = (db: Db) => Promise.all(Array.from({ length: 6 }, () => db.query('SELECT pg_sleep(0.05)')));
  const until = async (check: () => boolean) => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
    return check();
  };

  test('at most DB_POOL_SIZE connections; idle ones close after the idle timeout, not before', async () => {
    const short = await open(3, 1);
    const long = await open(3);
    let waited = 0;
    const sample = setInterval(() => (waited = Math.max(waited, short.poolState!().waiting)), 5);
    await Promise.all([burst(short), burst(long)]);
    clearInterval(sample);
    expect(short.poolState!().total).toBe(3);
    expect(waited).toBeGreaterThan(0);
    expect(long.poolState!().total).toBe(3);
    expect(await until(() => short.poolState!().total === 0)).toBe(true);
    // The default keeps them for minutes: still open after the short pool let its go.
    expect(long.poolState!()).toMatchObject({ total: 3, idle: 3 });
  });

  /** `terminus_db_refusals_total` of one reason, as /metrics would show it. */
  const refusals = async (reason: string) => (await metricsRegistry.getSingleMetric('terminus_db_refusals_total')!.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

  /** A transaction holding the pool's connection with one statement of `seconds`, inside the store's bounds. */
  const slowStatement = (db: Db, seconds: number) =>
    db.transaction(async (tx) => {
      await tx.query("SET LOCAL statement_timeout = '30s'");
      await tx.query(`SELECT pg_sleep(${seconds})`, [], { timeoutMs: 30_000 });
      return 'done';
    });

  test('a pool of one held by one slow statement: a second request is told the server is busy (503, Retry-After 2), not that the database is unavailable', async () => {
    const db = await openDb({ databaseUrl: process.env.DATABASE_URL, schema: `t_${crypto.randomBytes(6).toString('hex')}`, poolSize: 1 });
    dbs.push(db);
    await migrate(db);
    const app = createApp(await createTestContext({ db }));
    expect((await request(app).get('/fhir/Slot?_count=1')).status).toBe(200);
    const busyBefore = await refusals('busy');
    const unavailableBefore = await refusals('unavailable');

    // 7 s: the guard's per-address rate limit waits its 3 s first and then lets the request in
    // (fail open), so the JWKS read is the second wait of that request.
    const slow = slowStatement(db, 7);
    expect(await until(() => db.poolState!().idle === 0)).toBe(true);
    const [search, jwks, direct] = await Promise.all([
      request(app).get('/fhir/Slot?_count=1'),
      request(app).get('/svc/v1/jwks'),
      db.query('SELECT 1').catch((err: unknown) => err),
    ]);
    expect([search.status, search.headers['retry-after'], search.body.issue]).toEqual([
      503,
      '2',
      [expect.objectContaining({ severity: 'error', code: 'transient', diagnostics: 'The server is busy: no database connection became free within 3 s; retry later' })],
    ]);
    expect([jwks.status, jwks.headers['retry-after'], jwks.body.error, jwks.body.error_description]).toEqual([503, '2', 'temporarily_unavailable', 'the server is busy: no database connection became free within 3 s; retry later']);
    expect(direct).toBeInstanceOf(StoreBusy);
    expect((direct as StoreBusy).code).toBe('store_busy');
    // The database was fine all along: the slow statement itself completes.
    await expect(slow).resolves.toBe('done');
    expect((await request(app).get('/fhir/Slot?_count=1')).status).toBe(200);
    expect(await refusals('busy')).toBeGreaterThanOrEqual(busyBefore + 3);
    expect(await refusals('unavailable')).toBe(unavailableBefore);
  });

  test('a pool of one whose connection lost its database (a partition): the request waiting for it is told the database is unavailable', async () => {
    const relay = await tcpRelay(process.env.DATABASE_URL!, 5432);
    try {
      const db = await openDb({ databaseUrl: relay.url(process.env.DATABASE_URL!), poolSize: 1 });
      dbs.push(db);
      await db.query('SELECT 1');
      // The holder's statement starts first, then the partition: its answer never comes.
      const holder = db.query('SELECT pg_sleep(0.5)').catch((err: unknown) => err);
      await new Promise((r) => setTimeout(r, 100));
      relay.pause();
      const waiter = await db.query('SELECT 1').catch((err: unknown) => err);
      expect(await holder).toBeInstanceOf(StoreUnavailable);
      expect(waiter).toBeInstanceOf(StoreUnavailable);
      expect(waiter).not.toBeInstanceOf(StoreBusy);
    } finally {
      await relay.close();
    }
  });
});
