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
});
