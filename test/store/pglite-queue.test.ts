import { openPglite } from '../../src/store/db';

/**
 * Issue 15: the embedded store is one connection with one queue. Callers that keep it busy (32
 * booking clients in a closed loop) must not keep a caller that comes later through the event
 * loop (a new HTTP connection, a timer) waiting until the queue runs dry: it joins the queue and
 * its turn comes after the units queued before it.
 */
test('a query that arrives through the event loop while the queue is busy gets its turn after those queued before it', async () => {
  const db = await openPglite();
  const UNITS = 5_000; // per client: without turns of their own the clients end before the timer below fires
  let stop = false;
  let served = 0;
  const client = async () => {
    for (let i = 0; i < UNITS && !stop; i++) {
      await db.query('SELECT 1');
      served++;
    }
  };
  const clients = Array.from({ length: 8 }, client);
  try {
    await new Promise((resolve) => setTimeout(resolve, 20)); // fires only when the event loop gets a turn
    const before = served;
    expect(before).toBeLessThan(8 * UNITS); // the queue had not run dry
    expect((await db.query<{ n: number }>('SELECT 2 AS n')).rows[0].n).toBe(2);
    expect(served - before).toBeLessThanOrEqual(16); // at most the 8 queued ahead, and 8 more as they come back
  } finally {
    stop = true;
    await Promise.all(clients);
    await db.close();
  }
});
