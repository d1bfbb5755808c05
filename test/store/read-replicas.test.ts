import type { Patient } from '@medplum/fhirtypes';
import { ConfigError, loadConfig } from '../../src/config';
import { parseSearch } from '../../src/fhir/search-request';
import type { AppContext } from '../../src/context';
import { createContext, openStore } from '../../src/server';
import { dbReads } from '../../src/server-lib/metrics';
import { Repository, type Db } from '../../src/store';
import { postgresBin, startReplicatedCluster, type ReplicatedCluster } from '../helpers/pg-replica';

/**
 * DATABASE_READ_URL against a real streaming replica (a second cluster made with pg_basebackup):
 * a caller's reads go to the replica once it has replayed the caller's writes, to the primary
 * until then; a replica further behind than DATABASE_READ_MAX_LAG, or gone, is left out; writes
 * and transactions never reach it.
 */
const describeReplica = postgresBin() || process.env.CI ? describe : describe.skip;

describeReplica('reads on a streaming replica', () => {
  let cluster: ReplicatedCluster;
  let db: Db;
  let repo: Repository;
  const practice = { institution: '1-REPLICA-PRAXIS', isOwner: false };
  const owner = { institution: '1-REPLICA-OWNER', isOwner: true };

  beforeAll(async () => {
    cluster = await startReplicatedCluster();
    db = await openStore(loadConfig({ DATABASE_URL: cluster.primaryUrl, DATABASE_READ_URL: cluster.replicaUrl, DATABASE_READ_MAX_LAG: '3s', PUBLIC_URL: 'http://localhost:8080', LOG_LEVEL: 'silent' }));
    repo = new Repository(db, 'http://localhost:8080/fhir');
  }, 180_000);
  afterAll(async () => {
    await db?.close();
    cluster?.stop();
  });

  const reads = async () => Object.fromEntries((await dbReads.get()).values.map((v) => [v.labels.target, v.value])) as { replica?: number; primary?: number };
  /** Where `read` was answered: the primary when its counter moved (also after a replica failed under the read), else the replica. */
  async function whereRuns<T>(read: () => Promise<T>): Promise<{ on: 'replica' | 'primary'; result: T | Error }> {
    const before = await reads();
    const result = await read().catch((err: Error) => err);
    const after = await reads();
    return { on: (after.primary ?? 0) > (before.primary ?? 0) ? 'primary' : 'replica', result };
  }
  const patient = (family: string): Patient => ({ resourceType: 'Patient', name: [{ family }] });
  const until = async (what: string, done: () => Promise<boolean>) => {
    for (let i = 0; !(await done()); i++) {
      if (i > 600) throw new Error(`${what}: not within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  test('a caller that has not written reads from the replica once it has replayed', async () => {
    const p = await repo.actingAs('rest', owner).create(patient('Vorab'));
    await cluster.caughtUp();
    // The owner's own write is at most a look (200 ms) old for the routing: wait for one past it.
    await until('the replica serves the owner', async () => (await whereRuns(() => repo.read('Patient', p.id!, owner))).on === 'replica');
    const search = await whereRuns(() => repo.search(parseSearch('Patient', [['family', 'Vorab']]).request, practice));
    expect(search.on).toBe('replica');
  });

  test('the writer reads its write at once, from the primary, while the replica has not replayed it; another caller is served by the replica until it lags too far', async () => {
    await cluster.pauseReplay();
    try {
      const written = await repo.actingAs('rest', practice).create(patient('Eilig'));
      const own = await whereRuns(() => repo.read<Patient>('Patient', written.id!, practice));
      expect(own.on).toBe('primary');
      expect((own.result as Patient).name?.[0]?.family).toBe('Eilig');
      // The owner sees every Patient, but has not written since: the replica (paused, less than 3 s behind) answers, without the new one.
      const other = await whereRuns(() => repo.read('Patient', written.id!, owner));
      expect([other.on, (other.result as Error & { status?: number }).status]).toEqual(['replica', 404]);
      // Past the allowed lag the replica serves nobody: the primary answers, with the new Patient.
      await new Promise((r) => setTimeout(r, 3500));
      const later = await whereRuns(() => repo.read<Patient>('Patient', written.id!, owner));
      expect([later.on, (later.result as Patient).id]).toEqual(['primary', written.id]);
      expect(db.reads!.state()).toMatchObject({ status: 'degraded', replicas: [{ status: 'lagging' }] });
    } finally {
      await cluster.resumeReplay();
    }
    await cluster.caughtUp();
    await until('the replica is current again', async () => db.reads!.state().status === 'ok');
    await until('the replica serves again', async () => (await whereRuns(() => repo.read('Patient', 'nope', owner))).on === 'replica');
  });

  test('writes and transactions run on the primary (the replica is read-only: a write there would fail)', async () => {
    const created = await repo.actingAs('rest', practice).withTransaction(async (tx) => {
      const a = await tx.create(patient('Transaktion'));
      return tx.read<Patient>('Patient', a.id!, practice);
    });
    expect(created.name?.[0]?.family).toBe('Transaktion');
  });

  test('a replica that goes away is left out: reads run on the primary without an error, and it serves again once back', async () => {
    cluster.stopReplica();
    try {
      const first = await whereRuns(() => repo.read('Patient', 'absent', owner));
      expect(first.on).toBe('primary');
      expect((first.result as Error).message).toMatch(/not found|absent/i);
      await until('the replica is seen as unreachable', async () => db.reads!.state().replicas[0].status === 'unreachable');
      const p = await repo.actingAs('rest', owner).create(patient('Ohne Replikat'));
      expect(((await whereRuns(() => repo.read<Patient>('Patient', p.id!, practice))).result as Patient).id).toBe(p.id);
    } finally {
      cluster.startReplica();
    }
    await until('the replica serves again', async () => (await whereRuns(() => repo.read('Patient', 'nope', owner))).on === 'replica');
  });
});

// Two replicas of the application share one Redis: a write through one is read through the other
// from the primary until the database replica has it.
const describeShared = (postgresBin() || process.env.CI) && process.env.REDIS_URL ? describe : describe.skip;
describeShared('read-your-writes across replicas of the application (Redis)', () => {
  let cluster: ReplicatedCluster;
  const contexts: AppContext[] = [];
  beforeAll(async () => {
    cluster = await startReplicatedCluster();
    for (let i = 0; i < 2; i++) {
      contexts.push(await createContext(loadConfig({ DATABASE_URL: cluster.primaryUrl, DATABASE_READ_URL: cluster.replicaUrl, DATABASE_READ_MAX_LAG: '30s', REDIS_URL: process.env.REDIS_URL!, PUBLIC_URL: 'http://localhost:8080', LOG_LEVEL: 'silent' })));
    }
  }, 180_000);
  afterAll(async () => {
    for (const ctx of contexts) {
      ctx.redis?.disconnect();
      await ctx.db.close();
    }
    cluster?.stop();
  });

  test('written through one, read through the other: the primary answers while the database replica lags', async () => {
    const [one, two] = contexts.map((ctx) => new Repository(ctx.db, 'http://localhost:8080/fhir'));
    const practice = { institution: `1-SHARED-${Date.now()}`, isOwner: false };
    await cluster.caughtUp();
    await cluster.pauseReplay();
    try {
      const written = await one.actingAs('rest', practice).create<Patient>({ resourceType: 'Patient', name: [{ family: 'Geteilt' }] });
      // The mark goes to Redis after the commit, without holding the write: wait until it is there.
      const redis = contexts[0].redis!;
      for (let i = 0; (await redis.get(`terminus:last-write:${practice.institution}`)) === null; i++) {
        if (i > 100) throw new Error('no write mark in Redis');
        await new Promise((r) => setTimeout(r, 50));
      }
      const read = await two.read<Patient>('Patient', written.id!, practice);
      expect(read.name?.[0]?.family).toBe('Geteilt');
    } finally {
      await cluster.resumeReplay();
    }
  });
});

test('DATABASE_READ_URL needs DATABASE_URL and PostgreSQL URLs', () => {
  expect(() => loadConfig({ DATABASE_READ_URL: 'postgresql://replica/terminus' })).toThrow(ConfigError);
  expect(() => loadConfig({ DATABASE_READ_URL: 'postgresql://replica/terminus' })).toThrow(/DATABASE_READ_URL: needs DATABASE_URL/);
  expect(() => loadConfig({ DATABASE_URL: 'postgresql://primary/terminus', DATABASE_READ_URL: 'postgresql://a/t, mysql://b/t' })).toThrow(/DATABASE_READ_URL: each entry must be a postgres/);
  expect(loadConfig({ DATABASE_URL: 'postgresql://primary/terminus', DATABASE_READ_URL: 'postgresql://a/t, postgresql://b/t' }).databaseReadUrls).toEqual(['postgresql://a/t', 'postgresql://b/t']);
});
