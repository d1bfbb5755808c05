import type { Basic } from '@medplum/fhirtypes';
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

  test('rows alongside a write go in the write\'s own statement, with their parameters renumbered, and fail with it', async () => {
    const holdOf = (id: string) => ({
      statements: ['INSERT INTO booking_slot_hold (slot_id, appointment_id) SELECT s, $2 FROM unnest($1::text[]) AS u(s)'],
      params: [[`al-slot-${id}`], id],
    });
    const stored = await repo.create<Basic>({ resourceType: 'Basic', code: { text: 'alongside' } }, { alongside: (id) => holdOf(id) });
    const held = await ctx.db.query<{ slot_id: string; appointment_id: string }>('SELECT slot_id, appointment_id FROM booking_slot_hold WHERE appointment_id = $1', [stored.id]);
    expect(held.rows).toEqual([{ slot_id: `al-slot-${stored.id}`, appointment_id: stored.id }]);
    // An update (more CTEs before the rows alongside) numbers them after its own parameters too.
    await repo.update({ resourceType: 'Basic', id: 'al-upd', code: { text: 'one' } });
    await repo.update({ resourceType: 'Basic', id: 'al-upd', code: { text: 'two' } }, { alongside: () => holdOf('al-upd') });
    expect((await ctx.db.query('SELECT 1 FROM booking_slot_hold WHERE slot_id = $1', ['al-slot-al-upd'])).rows).toHaveLength(1);
    // A row alongside that fails takes the write with it: version 2 stays the last.
    const failed = repo.update({ resourceType: 'Basic', id: 'al-upd', code: { text: 'three' } }, { alongside: () => holdOf('al-upd') });
    await expect(failed).rejects.toMatchObject({ code: '23505', table: 'booking_slot_hold' });
    expect((await repo.readRow('Basic', 'al-upd'))?.versionId).toBe(2);
    expect((await repo.read<Basic>('Basic', 'al-upd')).code?.text).toBe('two');
  });

  test('lockRows locks rows in one statement and reads what each one references with them', async () => {
    await repo.update({ resourceType: 'Schedule', id: 'lr-s', active: true, actor: [{ reference: 'Practitioner/x' }] });
    const slot = (id: string, reference: string) => ({ resourceType: 'Slot' as const, id, schedule: { reference }, status: 'free' as const, start: '2031-01-01T08:00:00Z', end: '2031-01-01T08:15:00Z' });
    await repo.update(slot('lr-1', 'Schedule/lr-s'));
    await repo.update(slot('lr-2', 'http://localhost:8080/fhir/Schedule/lr-s'));
    await repo.update(slot('lr-3', 'Schedule/lr-missing'));
    await repo.update(slot('lr-4', 'Schedule/lr-s'));
    await repo.delete('Slot', 'lr-4');
    await repo.update({ resourceType: 'Patient', id: 'lr-p', active: true });
    await repo.update({ resourceType: 'Patient', id: 'lr-p-gone' });
    await repo.delete('Patient', 'lr-p-gone');
    await repo.withTransaction(async (tx) => {
      const read = [
        { type: 'Patient', id: 'lr-p' },
        { type: 'Patient', id: 'lr-p-gone' },
        { type: 'Patient', id: 'lr-p-none' },
        { type: 'Schedule', id: 'lr-s' },
      ];
      const { locked: rows, read: got } = await tx.lockRows('Slot', ['lr-3', 'lr-1', 'lr-2', 'lr-1', 'lr-4', 'lr-none'], { path: ['schedule', 'reference'], type: 'Schedule' }, read);
      expect([...rows.keys()]).toEqual(['lr-1', 'lr-2', 'lr-3', 'lr-4']);
      expect(rows.get('lr-1')?.followed).toMatchObject({ id: 'lr-s', deleted: false, versionId: 1, resource: { resourceType: 'Schedule', active: true } });
      expect(rows.get('lr-2')?.followed?.id).toBe('lr-s');
      expect(rows.get('lr-3')?.followed).toBeUndefined();
      expect(rows.get('lr-4')?.row.deleted).toBe(true);
      // The rows to read come with the same statement: every key answered, absent ones undefined.
      expect([...got.keys()].sort()).toEqual(['Patient/lr-p', 'Patient/lr-p-gone', 'Patient/lr-p-none', 'Schedule/lr-s']);
      expect(got.get('Patient/lr-p')).toMatchObject({ deleted: false, versionId: 1, owner: null, resource: { resourceType: 'Patient', id: 'lr-p', active: true } });
      expect(got.get('Patient/lr-p-gone')).toMatchObject({ deleted: true, versionId: 2 });
      expect(got.get('Patient/lr-p-none')).toBeUndefined();
      expect(got.get('Schedule/lr-s')?.resource).toMatchObject({ resourceType: 'Schedule', id: 'lr-s' });
      // Held now: a locking read comes from the lock cache, as after readRow(..., { forUpdate }).
      expect(await tx.readRow('Slot', 'lr-1', { forUpdate: true })).toBe(rows.get('lr-1')?.row);
      expect((await tx.lockRows('Slot', ['lr-2'], { path: ['schedule', 'reference'], type: 'Schedule' })).locked.get('lr-2')).toEqual({ row: rows.get('lr-2')?.row });
      // Rows to read beside slots this transaction holds already: still read, in a statement of their own.
      const again = await tx.lockRows('Slot', ['lr-1'], { path: ['schedule', 'reference'], type: 'Schedule' }, [{ type: 'Patient', id: 'lr-p' }]);
      expect(again.locked.get('lr-1')).toEqual({ row: rows.get('lr-1')?.row });
      expect(again.read.get('Patient/lr-p')?.resource).toMatchObject({ id: 'lr-p' });
      // Nothing to lock and nothing to read: no statement, empty answers.
      expect(await tx.lockRows('Slot', [], { path: ['schedule', 'reference'], type: 'Schedule' })).toEqual({ locked: new Map(), read: new Map() });
      if (ctx.db.kind === 'pg') {
        // Another connection cannot take them meanwhile.
        const other = ctx.db.query("SELECT id FROM resource WHERE resource_type = 'Slot' AND id = 'lr-2' FOR UPDATE NOWAIT");
        await expect(other).rejects.toThrow();
      }
    });
  });
});
