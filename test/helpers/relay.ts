import net from 'node:net';

/**
 * A TCP relay in front of PostgreSQL or Redis that a test can break the way networks break:
 * - `cut()`: every connection is reset and new ones are refused (a restart, a dropped link);
 * - `pause()`: connections stay open but nothing passes either way, and new ones are accepted
 *   and left waiting (a partition: packets dropped, no reset);
 * - `restore()` / `resume()` undo them on the same port.
 */
export interface TcpRelay {
  readonly port: number;
  /** `scheme://127.0.0.1:<port>` plus the target URL's path, credentials and query. */
  url(target: string): string;
  cut(): void;
  restore(): Promise<void>;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function tcpRelay(targetUrl: string, defaultPort: number): Promise<TcpRelay> {
  const target = new URL(targetUrl);
  const pairs = new Set<Pair>();
  let paused = false;

  class Pair {
    upstream?: net.Socket;
    private readonly held: Buffer[] = [];
    constructor(readonly client: net.Socket) {
      client.on('error', () => undefined);
      client.on('close', () => this.destroy());
      client.on('data', (chunk: Buffer) => (this.upstream && !paused ? this.upstream.write(chunk) : this.held.push(chunk)));
      if (paused) client.pause();
      else this.connect();
    }
    connect(): void {
      const upstream = net.connect(Number(target.port || defaultPort), target.hostname);
      this.upstream = upstream;
      upstream.on('error', () => undefined);
      upstream.on('close', () => this.destroy());
      upstream.on('data', (chunk: Buffer) => this.client.write(chunk));
      for (const chunk of this.held.splice(0)) upstream.write(chunk);
    }
    pause(): void {
      this.client.pause();
      this.upstream?.pause();
    }
    resume(): void {
      if (!this.upstream) this.connect();
      for (const chunk of this.held.splice(0)) this.upstream!.write(chunk);
      this.client.resume();
      this.upstream!.resume();
    }
    destroy(): void {
      pairs.delete(this);
      this.client.destroy();
      this.upstream?.destroy();
    }
  }

  const server = net.createServer((client) => {
    pairs.add(new Pair(client));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    url: (t) => {
      const u = new URL(t);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cut: () => {
      server.close();
      for (const p of [...pairs]) {
        p.client.resetAndDestroy();
        p.destroy();
      }
    },
    restore: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
    pause: () => {
      paused = true;
      for (const p of pairs) p.pause();
    },
    resume: () => {
      paused = false;
      for (const p of pairs) p.resume();
    },
    close: async () => {
      for (const p of [...pairs]) p.destroy();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
