import type { Resource } from '@medplum/fhirtypes';
import request from 'supertest';
import { composeTerminus } from '../../src/app';
import type { AppContext } from '../../src/context';
import { Repository, type WriteEvent, type WriteInterceptor } from '../../src/store';
import { OperationOutcomeError, unprocessable } from '../../src/server-lib/outcomes';
import { createTestContext } from '../helpers/context';

const BASE = 'http://localhost:8080/fhir';

/** An interceptor that records what it saw and refuses Practitioners named "Refused". */
function recorder(): WriteInterceptor & { seen: Omit<WriteEvent, 'repo'>[] } {
  const seen: Omit<WriteEvent, 'repo'>[] = [];
  return {
    name: 'test: recorder',
    types: ['Practitioner'],
    seen,
    async beforeWrite({ repo: _repo, ...event }) {
      seen.push(structuredClone(event));
      const family = (event.resource as { name?: { family?: string }[] } | undefined)?.name?.[0]?.family;
      if (family === 'Refused') throw unprocessable('refused by the test interceptor', 'Practitioner.name');
      if (family === 'Amend' && event.resource) (event.resource as Resource & { active?: boolean }).active = false;
    },
  };
}

const practitioner = (id: string, family: string) => ({ resourceType: 'Practitioner' as const, id, name: [{ family }] });

describe('write interceptors run by the repository', () => {
  let ctx: AppContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.db.close());

  test('every create, update and delete is seen once, with its interaction, previous version, origin and writer', async () => {
    const rec = recorder();
    const repo = new Repository(ctx.db, BASE, ctx.now, [rec]);
    const created = await repo.actingAs('import').create(practitioner('ignored', 'Eins'));
    const writer = { institution: '1-2-3', isOwner: false };
    await repo.actingAs('rest', writer).update({ ...created, name: [{ family: 'Zwei' }] });
    await repo.actingAs('job').delete('Practitioner', created.id as string);
    // Deleting what is already deleted writes nothing, so nothing is intercepted.
    await repo.delete('Practitioner', created.id as string);
    expect(rec.seen.map((e) => [e.interaction, e.origin, e.writer?.institution, e.previous?.id, (e.resource as { name?: { family?: string }[] })?.name?.[0]?.family])).toEqual([
      ['create', 'import', undefined, undefined, 'Eins'],
      ['update', 'rest', '1-2-3', created.id, 'Zwei'],
      ['delete', 'job', undefined, created.id, undefined],
    ]);
  });

  test('types an interceptor does not name pass it by', async () => {
    const rec = recorder();
    await new Repository(ctx.db, BASE, ctx.now, [rec]).create({ resourceType: 'Organization', name: 'Praxis' });
    expect(rec.seen).toHaveLength(0);
  });

  test('a refusal rolls the write back; an amendment is stored', async () => {
    const repo = new Repository(ctx.db, BASE, ctx.now, [recorder()]);
    const err = await repo.update(practitioner('refused-1', 'Refused')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationOutcomeError);
    expect(await repo.readRow('Practitioner', 'refused-1')).toBeUndefined();
    const amended = await repo.update(practitioner('amend-1', 'Amend'));
    expect((await repo.read('Practitioner', 'amend-1')) as { active?: boolean }).toMatchObject({ active: false });
    expect((amended.resource as Resource).meta?.versionId).toBe('1');
  });

  test('inside a transaction the interceptor works on the same transaction and origin', async () => {
    const rec = recorder();
    const repo = new Repository(ctx.db, BASE, ctx.now, [rec]).actingAs('booking');
    await expect(
      repo.withTransaction(async (tx) => {
        await tx.update(practitioner('tx-1', 'Eins'));
        await tx.update(practitioner('tx-2', 'Refused'));
      }),
    ).rejects.toBeInstanceOf(OperationOutcomeError);
    expect(await repo.readRow('Practitioner', 'tx-1')).toBeUndefined();
    expect(rec.seen.map((e) => e.origin)).toEqual(['booking', 'booking']);
  });

  test('two applications in one process share no interceptor', async () => {
    const a = recorder();
    const b = recorder();
    const one = composeTerminus(ctx, { interceptors: [a] });
    const two = composeTerminus(ctx, { interceptors: [b] });
    try {
      const res = await request(one.app).put('/fhir/Practitioner/app-1').set('Content-Type', 'application/fhir+json').send(JSON.stringify(practitioner('app-1', 'Eins')));
      expect(res.status).toBe(201);
      expect(a.seen.map((e) => [e.interaction, e.origin])).toEqual([['update', 'rest']]);
      expect(b.seen).toHaveLength(0);
      const refused = await request(two.app).put('/fhir/Practitioner/app-2').set('Content-Type', 'application/fhir+json').send(JSON.stringify(practitioner('app-2', 'Refused')));
      expect(refused.status).toBe(422);
      expect(a.seen).toHaveLength(1);
    } finally {
      await one.stop();
      await two.stop();
    }
  });
});
