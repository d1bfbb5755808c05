import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { connectRedis } from '../src/server';

/**
 * Redis going away under a running server (REDIS_URL through a TCP relay the test cuts): /readyz
 * says so, guard requests fail fast with 503 temporarily_unavailable instead of waiting in the
 * offline queue, and SIGTERM still stops the process. `terminus serve` runs as its own process,
 * as an operator runs it.
 */
const redisUrl = process.env.REDIS_URL;
const describeWithRedis = redisUrl ? describe : describe.skip;

describeWithRedis('a running server when Redis goes away', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-redis-'));
  let relay: RedisRelay;
  let server: ChildProcess;
  let url: string;

  beforeAll(async () => {
    relay = await redisRelay(redisUrl as string);
    const { port } = relay;
    server = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, '..', 'src', 'main.ts'), 'serve'], {
      env: { PATH: process.env.PATH, PORT: '0', METRICS_PORT: '0', DATA_DIR: dataDir, DEMO_DATA: 'false', LOG_LEVEL: 'info', REDIS_URL: `redis://127.0.0.1:${port}` },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    url = await listening(server);
  }, 120_000);

  afterAll(() => {
    if (server.exitCode === null) server.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('readiness fails, guard requests answer 503 at once, and SIGTERM stops the process', async () => {
    const discovery = await get(`${url}/.well-known/oauth-authorization-server`);
    const noncePath = new URL(JSON.parse(discovery.body).nonce_endpoint as string).pathname;
    expect((await get(`${url}/readyz`)).status).toBe(200);
    expect((await get(`${url}${noncePath}`)).status).toBe(200);

    relay.cut();
    await new Promise((resolve) => setTimeout(resolve, 200));

    const ready = await get(`${url}/readyz`);
    expect([ready.status, JSON.parse(ready.body)]).toEqual([503, { status: 'unavailable', checks: { store: 'ok', redis: 'unavailable', policy_engine: 'ok' } }]);
    const started = Date.now();
    const nonce = await get(`${url}${noncePath}`);
    // Issue 16: within 5 s with the dependency gone (the spec's bound, not a tighter one).
    expect(Date.now() - started).toBeLessThan(5000);
    expect(nonce.status).toBe(503);
    expect(JSON.parse(nonce.body)).toMatchObject({ error: 'temporarily_unavailable', error_uri: expect.stringMatching(/#temporarily_unavailable$/) });

    const stopping = Date.now();
    const exited = new Promise<number | null>((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(15_000);
  }, 120_000);
});

/** The address from the `terminus listening` log line. */
function listening(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.includes('terminus listening'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)));
  });
}

describeWithRedis('the shared Redis connection', () => {
  test('logs one line when Redis goes away and one when it is back, not one per reconnect attempt', async () => {
    const relay = await redisRelay(redisUrl as string);
    const { port } = relay;
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk)).msg), done()) }));
    const redis = await connectRedis(`redis://127.0.0.1:${port}`, logger);
    try {
      expect(await redis.ping()).toBe('PONG');
      // Refuse connections for a while: ioredis retries many times meanwhile.
      relay.cut();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await expect(redis.ping()).rejects.toThrow();
      await relay.restore();
      const until = Date.now() + 10_000;
      while (redis.status !== 'ready' && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await redis.ping()).toBe('PONG');
      expect(lines).toEqual([expect.stringMatching(/^redis unreachable/), 'redis reachable again']);
    } finally {
      redis.disconnect();
      relay.cut();
    }
  }, 120_000);
});

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/** A TCP relay to Redis the test can cut (refusing and dropping connections) and restore on the same port. */
interface RedisRelay {
  port: number;
  cut(): void;
  restore(): Promise<void>;
}

async function redisRelay(redis: string): Promise<RedisRelay> {
  const target = new URL(redis);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    cut: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
    restore: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
  };
}
