import net from 'node:net';
import { openPglite } from '../../src/store/db';

/**
 * The embedded store is one connection with one queue. Callers that keep it busy (32
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

/**
 * The same with real connections: one poll of the event loop hands over every socket that is
 * ready, and Node accepts one new connection per poll. Eight clients keep the store busy; then
 * sixteen new ones connect at once. Each new connection must be served after a bounded number of
 * other units (about one per poll, as it waits to be accepted), not after a batch per poll: when a
 * unit that found the queue empty ran at once, every ready socket's callback of one poll ran its
 * unit in that poll, and the sixteenth connection waited for well over a hundred units.
 */
test('new connections are accepted while busy connections keep the queue full: each waits a bounded number of units', async () => {
  const db = await openPglite();
  let units = 0;
  const server = net.createServer((socket) => {
    socket.on('data', () => {
      // A request's own work before it queues (parsing, validation), then its unit.
      const until = performance.now() + 1;
      while (performance.now() < until);
      void db.query('SELECT 1').then(() => {
        units++;
        socket.write('.');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const sockets: net.Socket[] = [];
  const open = () =>
    new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
      sockets.push(s);
    });
  let stop = false;
  try {
    // Eight busy clients: each sends its next request as soon as an answer comes.
    for (let i = 0; i < 8; i++) {
      const s = await open();
      s.on('data', () => {
        if (!stop) s.write('?');
      });
      s.write('?');
    }
    while (units < 200) await new Promise((resolve) => setImmediate(resolve));
    // Sixteen new clients at once; each counts the units served from its start to its answer.
    const waited = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const from = units;
        const s = await open();
        s.write('?');
        await new Promise((resolve) => s.once('data', resolve));
        return units - from;
      }),
    );
    // A poll accepts one connection and runs about one unit of each busy client at most.
    expect(Math.max(...waited)).toBeLessThanOrEqual(16 * 3 + 8);
  } finally {
    stop = true;
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
    await db.close();
  }
});
