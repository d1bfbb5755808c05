import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What one receiver saw: arrival time (performance.now) per `events-since-subscription-start`. */
export interface ReceiverLog {
  port: number;
  handshakes: number;
  arrivals: Map<number, number>;
}

/**
 * `count` rest-hook receivers on loopback, each an HTTP server of its own (own port, own
 * connections), like endpoints of distinct clients. They answer 200 at once and note when each
 * event notification arrived.
 */
export async function startReceivers(count: number): Promise<{ logs: ReceiverLog[]; stop(): Promise<void> }> {
  const servers: http.Server[] = [];
  const logs: ReceiverLog[] = [];
  for (let i = 0; i < count; i++) {
    const log: ReceiverLog = { port: 0, handshakes: 0, arrivals: new Map() };
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = performance.now();
        const text = Buffer.concat(chunks).toString('utf8');
        const type = /"name":"type","valueCode":"([a-z-]+)"/.exec(text)?.[1];
        const n = Number(/"name":"events-since-subscription-start","valueString":"(\d+)"/.exec(text)?.[1] ?? '0');
        if (type === 'handshake') log.handshakes += 1;
        if (type === 'event-notification' && !log.arrivals.has(n)) log.arrivals.set(n, at);
        res.statusCode = 200;
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    log.port = (server.address() as AddressInfo).port;
    servers.push(server);
    logs.push(log);
  }
  return {
    logs,
    stop: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
