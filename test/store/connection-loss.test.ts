import request from 'supertest';
import { createApp } from '../../src/app';
import { openDb, StoreUnavailable, type Db } from '../../src/store';
import { createTestContext } from '../helpers/context';

/**
 * A dropped PostgreSQL connection must not end the process (an unhandled 'error' event
 * of the pool did, on every replica), and a database that cannot be reached answers 503 with
 * Retry-After (an OperationOutcome under /fhir, the guard's error object elsewhere), not 500.
 */
const pg = process.env.DATABASE_URL ? describe : describe.skip;

pg('PostgreSQL connection loss', () => {
  test('backends killed under an idle pool: the process lives on and the next requests are served', async () => {
    const ctx = await createTestContext();
    const admin = await openDb({ databaseUrl: process.env.DATABASE_URL });
    try {
      const app = createApp(ctx);
      expect((await request(app).get('/fhir/Patient?_count=1')).status).toBe(200);
      // The pool's own backends (and only them: other test files share this database).
      const pids = new Set<number>();
      await Promise.all(Array.from({ length: 8 }, async () => pids.add((await ctx.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid)));
      const errors: unknown[] = [];
      const onUncaught = (err: unknown) => errors.push(err);
      process.on('uncaughtException', onUncaught);
      try {
        await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [[...pids]]);
        await new Promise((r) => setTimeout(r, 300));
        const statuses: number[] = [];
        for (let i = 0; i < 3; i++) statuses.push((await request(app).get('/fhir/Patient?_count=1')).status);
        expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
        expect(statuses[statuses.length - 1]).toBe(200);
        expect(errors).toEqual([]);
      } finally {
        process.off('uncaughtException', onUncaught);
      }
    } finally {
      await admin.close();
      await ctx.db.close();
    }
  });

  test('a statement past the bounds: the server cancels it (statement_timeout) and the caller gets StoreUnavailable, the pool lives on', async () => {
    const ctx = await createTestContext();
    try {
      await expect(ctx.db.query('SELECT pg_sleep(5)')).rejects.toBeInstanceOf(StoreUnavailable);
      // Nothing half-done: a write that overran was not committed behind the caller's back.
      await ctx.db.query('CREATE TABLE overrun (n int)');
      await expect(ctx.db.query('INSERT INTO overrun SELECT 1 FROM pg_sleep(5)')).rejects.toBeInstanceOf(StoreUnavailable);
      expect((await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM overrun')).rows[0].n).toBe(0);
    } finally {
      await ctx.db.close();
    }
  });

  test('a database that cannot be reached: 503 with Retry-After, an OperationOutcome under /fhir and the guard error object at the guard', async () => {
    const unreachable: Db = await openDb({ databaseUrl: 'postgresql://postgres@127.0.0.1:1/test' });
    const ctx = await createTestContext({ db: unreachable });
    try {
      const app = createApp(ctx);
      const fhir = await request(app).get('/fhir/Patient?_count=1');
      expect(fhir.status).toBe(503);
      expect(fhir.headers['retry-after']).toBe('5');
      expect(fhir.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'transient' }] });
      const guard = await request(app).get('/svc/v1/nonce');
      expect(guard.status).toBe(503);
      expect(guard.body.error).toBe('temporarily_unavailable');
      expect(guard.headers['retry-after']).toBe('5');
      await expect(unreachable.query('SELECT 1')).rejects.toBeInstanceOf(StoreUnavailable);
      await expect(unreachable.transaction(async (tx) => tx.query('SELECT 1'))).rejects.toBeInstanceOf(StoreUnavailable);
      expect((await request(app).get('/readyz')).status).toBe(503);
    } finally {
      await unreachable.close();
    }
  });
});
