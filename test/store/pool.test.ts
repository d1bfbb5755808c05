import { openDb, type Db } from '../../src/store';

/**
 * Issue 15: the PostgreSQL pool's size and idle timeout are settings (DB_POOL_SIZE,
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
});
