import { GroupCommit, PipelinedCommit, TickBatch } from '../../src/server-lib/group-commit';

/** A write that records each batch and answers items doubled; it finishes when the test says so. */
function recordingWrite() {
  const batches: number[][] = [];
  const gates: (() => void)[] = [];
  const write = async (items: number[]) => {
    batches.push(items);
    await new Promise<void>((resolve) => gates.push(resolve));
    return items.map((i) => i * 2);
  };
  const openNext = async () => {
    while (gates.length === 0) await new Promise((r) => setImmediate(r));
    gates.shift()!();
  };
  return { batches, write, openNext };
}

describe('GroupCommit: calls arriving while a write is in flight go out together', () => {
  test('items submitted at the same moment share one write; those arriving during it share the next', async () => {
    const w = recordingWrite();
    const group = new GroupCommit<number, number>(w.write, (i) => String(i));
    const first = [1, 2, 3].map((i) => group.submit(i));
    await w.openNext();
    expect(await Promise.all(first)).toEqual([2, 4, 6]);
    expect(w.batches).toEqual([[1, 2, 3]]);

    const a = group.submit(4);
    while (w.batches.length < 2) await new Promise((r) => setImmediate(r));
    const later = [5, 6].map((i) => group.submit(i)); // the write of [4] is in flight
    await w.openNext();
    await w.openNext();
    expect([await a, ...(await Promise.all(later))]).toEqual([8, 10, 12]);
    expect(w.batches).toEqual([[1, 2, 3], [4], [5, 6]]);
  });

  test('a key already in the batch waits for the next write (a statement touches a row once)', async () => {
    const w = recordingWrite();
    const group = new GroupCommit<number, number>(w.write, (i) => (i % 2 === 0 ? 'even' : 'odd'));
    const all = [1, 2, 3, 4].map((i) => group.submit(i));
    await w.openNext();
    await w.openNext();
    expect(await Promise.all(all)).toEqual([2, 4, 6, 8]);
    expect(w.batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  test('a failed write rejects its own batch only; the group goes on', async () => {
    let calls = 0;
    const group = new GroupCommit<number, number>(
      async (items) => {
        calls += 1;
        if (calls === 1) throw new Error('store down');
        return items;
      },
      (i) => String(i),
    );
    await expect(group.submit(1)).rejects.toThrow('store down');
    await expect(group.submit(2)).resolves.toBe(2);
  });

  test('batches are capped', async () => {
    const sizes: number[] = [];
    const group = new GroupCommit<number, number>(
      async (items) => {
        sizes.push(items.length);
        return items;
      },
      (i) => String(i),
      2,
    );
    await Promise.all([1, 2, 3, 4, 5].map((i) => group.submit(i)));
    expect(sizes).toEqual([2, 2, 1]);
  });
});

describe('TickBatch: calls of one turn of the event loop go out together; batches do not wait for each other', () => {
  test('one turn, one call; the next turn goes out while the first is still in flight', async () => {
    const w = recordingWrite();
    const batch = new TickBatch<number, number>(w.write);
    const first = [1, 2, 2].map((i) => batch.submit(i));
    while (w.batches.length < 1) await new Promise((r) => setImmediate(r));
    const second = [3].map((i) => batch.submit(i));
    while (w.batches.length < 2) await new Promise((r) => setImmediate(r)); // the first has not answered yet
    expect(w.batches).toEqual([[1, 2, 2], [3]]);
    await w.openNext();
    await w.openNext();
    expect(await Promise.all([...first, ...second])).toEqual([2, 4, 4, 6]);
  });

  test('a failed call rejects its own batch only', async () => {
    let calls = 0;
    const batch = new TickBatch<number, number>(async (items) => {
      calls += 1;
      if (calls === 1) throw new Error('store down');
      return items;
    });
    await expect(Promise.all([batch.submit(1), batch.submit(2)])).rejects.toThrow('store down');
    await expect(batch.submit(3)).resolves.toBe(3);
  });

  test('batches are capped', async () => {
    const sizes: number[] = [];
    const batch = new TickBatch<number, number>(async (items) => {
      sizes.push(items.length);
      return items;
    }, 2);
    await Promise.all([1, 2, 3, 4, 5].map((i) => batch.submit(i)));
    expect(sizes).toEqual([2, 2, 1]);
  });
});

describe('PipelinedCommit', () => {
  test('calls of one turn go together; at most `parallel` writes are in flight; each caller gets its answer', async () => {
    let inFlight = 0;
    let most = 0;
    const batches: number[][] = [];
    const release: (() => void)[] = [];
    const pc = new PipelinedCommit<number, number>(async (items) => {
      inFlight++;
      most = Math.max(most, inFlight);
      batches.push(items);
      await new Promise<void>((r) => release.push(r));
      inFlight--;
      return items.map((x) => x * 10);
    }, 2);
    const first = [1, 2, 3].map((x) => pc.submit(x));
    await new Promise((r) => setImmediate(r));
    const second = [4, 5].map((x) => pc.submit(x));
    await new Promise((r) => setImmediate(r));
    const third = [6, 7].map((x) => pc.submit(x));
    await new Promise((r) => setImmediate(r));
    // Two writes in flight: the third turn's calls wait, gathered, for a free one.
    expect(batches).toEqual([[1, 2, 3], [4, 5]]);
    release.shift()!();
    await Promise.all(first);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1, 2, 3], [4, 5], [6, 7]]);
    while (release.length) release.shift()!();
    expect(await Promise.all([...first, ...second, ...third])).toEqual([10, 20, 30, 40, 50, 60, 70]);
    expect(most).toBe(2);
  });

  test('a failed write rejects its own callers only', async () => {
    const pc = new PipelinedCommit<number, number>(async (items) => {
      if (items.includes(2)) throw new Error('no');
      return items;
    }, 1);
    const a = pc.submit(1);
    await new Promise((r) => setImmediate(r));
    const b = pc.submit(2);
    await expect(b).rejects.toThrow('no');
    await expect(a).resolves.toBe(1);
  });
});
