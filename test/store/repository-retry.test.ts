import type { Patient } from '@medplum/fhirtypes';
import request from 'supertest';
import { composeTerminus, type Terminus } from '../../src/app';
import type { AppContext } from '../../src/context';
import { Repository } from '../../src/store/repository';
import type { WriteInterceptor } from '../../src/store/write-interceptors';
import { createTestContext } from '../helpers/context';

/** Resolves once `n` callers are waiting in it. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const all = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived === n) open();
    return all;
  };
}

/**
 * The repository's transactions that lose a race run again (store/db/retried-transaction.ts):
 * a PUT that creates an id another PUT created a moment before, and a transaction PostgreSQL
 * aborted to break a deadlock. PGlite runs one transaction at a time, so neither race can happen
 * there: PostgreSQL only.
 */
(process.env.DATABASE_URL ? describe : describe.skip)('retried transactions of the repository on PostgreSQL', () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.db.close());

  const patient = (id: string, family: string): Patient => ({ resourceType: 'Patient', id, name: [{ family }] });

  test('two PUTs creating one new id at once both succeed: the one that loses the insert runs again as an update', async () => {
    // Both writes have found no row before either inserts one.
    const bothRead = barrier(2);
    let runs = 0;
    const meet: WriteInterceptor = {
      name: 'meet',
      types: ['Patient'],
      beforeWrite: async () => {
        if (++runs <= 2) await bothRead();
      },
    };
    const repo = new Repository(ctx.db, 'http://localhost:8080/fhir', () => new Date(), [meet]);
    const results = await Promise.all([repo.update(patient('rr-new', 'Erste')), repo.update(patient('rr-new', 'Zweite'))]);
    expect(runs).toBe(3);
    expect(results.map((r) => r.created).sort()).toEqual([false, true]);
    expect(results.map((r) => r.resource.meta?.versionId).sort()).toEqual(['1', '2']);
    // Two versions: the first kept in resource_version, the second the resource row.
    const history = await repo.history('Patient', 'rr-new');
    expect(history.map((h) => h.versionId)).toEqual([2, 1]);
  });

  test('of two transactions locking two rows in opposite order, the one aborted for the deadlock runs again and both commit', async () => {
    const repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
    await repo.update(patient('rr-a', 'A'));
    await repo.update(patient('rr-b', 'B'));
    // Each transaction holds its first row before it asks for the other's.
    const bothLocked = barrier(2);
    let runs = 0;
    const lock = (first: string, second: string) =>
      repo.withRetriedTransaction(async (tx) => {
        runs++;
        await tx.readRow('Patient', first, { forUpdate: true });
        await bothLocked();
        await tx.readRow('Patient', second, { forUpdate: true });
        return `${first} then ${second}`;
      });
    await expect(Promise.all([lock('rr-a', 'rr-b'), lock('rr-b', 'rr-a')])).resolves.toEqual(['rr-a then rr-b', 'rr-b then rr-a']);
    expect(runs).toBe(3);
  });
  test('two writes that deadlock (each locks the other\'s row from an interceptor) both commit: the aborted one runs again', async () => {
    const seed = new Repository(ctx.db, 'http://localhost:8080/fhir');
    await seed.update(patient('rw-a', 'A'));
    await seed.update(patient('rw-b', 'B'));
    const bothLocked = barrier(2);
    let runs = 0;
    // Writing rw-a locks rw-a, then asks for rw-b; writing rw-b the other way round.
    const cross: WriteInterceptor = {
      name: 'cross',
      types: ['Patient'],
      beforeWrite: async (event) => {
        runs++;
        if (runs > 2) return;
        await bothLocked();
        await event.repo.readRow('Patient', event.resource?.id === 'rw-a' ? 'rw-b' : 'rw-a', { forUpdate: true });
      },
    };
    const repo = new Repository(ctx.db, 'http://localhost:8080/fhir', () => new Date(), [cross]);
    const results = await Promise.all([repo.update(patient('rw-a', 'A2')), repo.update(patient('rw-b', 'B2'))]);
    expect(runs).toBe(3);
    expect(results.map((r) => r.resource.meta?.versionId)).toEqual(['2', '2']);
  });
});

/**
 * A write PostgreSQL aborts for a concurrent one on every run it is given is a moment's
 * collision, not a server fault: 503 with Retry-After, and nothing stored.
 */
describe('a write that keeps colliding', () => {
  let ctx: AppContext;
  let terminus: Terminus;
  beforeAll(async () => {
    ctx = await createTestContext();
    let runs = 0;
    const collide: WriteInterceptor = {
      name: 'collide',
      types: ['Patient'],
      beforeWrite: async () => {
        runs++;
        throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001', runs });
      },
    };
    terminus = composeTerminus(ctx, { interceptors: [collide] });
  });
  afterAll(async () => {
    await terminus.stop();
    await ctx.db.close();
  });

  test('answers 503 transient with Retry-After and stores nothing', async () => {
    const res = await request(terminus.app).put('/fhir/Patient/rw-c').set('Content-Type', 'application/fhir+json').send({ resourceType: 'Patient', id: 'rw-c' });
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body.issue[0]).toMatchObject({ code: 'transient', diagnostics: expect.stringMatching(/concurrent writes/) });
    expect((await request(terminus.app).get('/fhir/Patient/rw-c')).status).toBe(404);
  });
});
