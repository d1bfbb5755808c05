import type { AppContext } from '../../src/context';
import { Repository } from '../../src/store/repository';
import { createTestContext } from '../helpers/context';

describe('repository writes inside one transaction', () => {
  let ctx: AppContext;
  let repo: Repository;
  beforeAll(async () => {
    ctx = await createTestContext();
    repo = new Repository(ctx.db, 'http://localhost:8080/fhir');
  });
  afterAll(() => ctx.db.close());

  test('a locked row follows the transaction\'s own writes and deletes', async () => {
    await repo.withTransaction(async (tx) => {
      expect(await tx.readRow('Practitioner', 'lk1', { forUpdate: true })).toBeUndefined();
      await tx.update({ resourceType: 'Practitioner', id: 'lk1', name: [{ family: 'Eins' }] });
      expect((await tx.readRow('Practitioner', 'lk1', { forUpdate: true }))?.versionId).toBe(1);
      await tx.update({ resourceType: 'Practitioner', id: 'lk1', name: [{ family: 'Zwei' }] });
      const locked = await tx.readRow('Practitioner', 'lk1', { forUpdate: true });
      expect(locked?.versionId).toBe(2);
      expect(locked?.resource).toMatchObject({ name: [{ family: 'Zwei' }] });
      await tx.delete('Practitioner', 'lk1');
      expect(await tx.readRow('Practitioner', 'lk1', { forUpdate: true })).toMatchObject({ deleted: true, versionId: 3 });
    });
    expect((await repo.history('Practitioner', 'lk1')).map((h) => [h.versionId, h.deleted])).toEqual([
      [3, true],
      [2, false],
      [1, false],
    ]);
  });

  test('nested withTransaction shares the transaction: a failure rolls back the outer writes', async () => {
    await expect(
      repo.withTransaction(async (tx) => {
        await tx.update({ resourceType: 'Practitioner', id: 'nest1' });
        await tx.withTransaction(async (inner) => {
          expect(inner).toBe(tx);
          throw new Error('boom');
        });
      }),
    ).rejects.toThrow('boom');
    expect(await repo.readRow('Practitioner', 'nest1')).toBeUndefined();
  });

  test('lockRows locks rows in one statement and reads what each one references with them', async () => {
    await repo.update({ resourceType: 'Schedule', id: 'lr-s', active: true, actor: [{ reference: 'Practitioner/x' }] });
    const slot = (id: string, reference: string) => ({ resourceType: 'Slot' as const, id, schedule: { reference }, status: 'free' as const, start: '2031-01-01T08:00:00Z', end: '2031-01-01T08:15:00Z' });
    await repo.update(slot('lr-1', 'Schedule/lr-s'));
    await repo.update(slot('lr-2', 'http://localhost:8080/fhir/Schedule/lr-s'));
    await repo.update(slot('lr-3', 'Schedule/lr-missing'));
    await repo.update(slot('lr-4', 'Schedule/lr-s'));
    await repo.delete('Slot', 'lr-4');
    await repo.withTransaction(async (tx) => {
      const rows = await tx.lockRows('Slot', ['lr-3', 'lr-1', 'lr-2', 'lr-1', 'lr-4', 'lr-none'], { path: ['schedule', 'reference'], type: 'Schedule' });
      expect([...rows.keys()]).toEqual(['lr-1', 'lr-2', 'lr-3', 'lr-4']);
      expect(rows.get('lr-1')?.followed).toMatchObject({ id: 'lr-s', deleted: false, versionId: 1, resource: { resourceType: 'Schedule', active: true } });
      expect(rows.get('lr-2')?.followed?.id).toBe('lr-s');
      expect(rows.get('lr-3')?.followed).toBeUndefined();
      expect(rows.get('lr-4')?.row.deleted).toBe(true);
      // Held now: a locking read comes from the lock cache, as after readRow(..., { forUpdate }).
      expect(await tx.readRow('Slot', 'lr-1', { forUpdate: true })).toBe(rows.get('lr-1')?.row);
      expect((await tx.lockRows('Slot', ['lr-2'], { path: ['schedule', 'reference'], type: 'Schedule' })).get('lr-2')).toEqual({ row: rows.get('lr-2')?.row });
      if (ctx.db.kind === 'pg') {
        // Another connection cannot take them meanwhile.
        const other = ctx.db.query("SELECT id FROM resource WHERE resource_type = 'Slot' AND id = 'lr-2' FOR UPDATE NOWAIT");
        await expect(other).rejects.toThrow();
      }
    });
  });
});
