import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/**
 * Starts `terminus serve` in a child process (its own core) at the default log level and waits
 * until /readyz answers;
 * `root`: another checkout of the project (a baseline revision to compare with).
 */
export interface ServerProcess {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** BENCH_SERVER_NODE: another Node binary for the servers and floors (the load generator stays on the bench's own). */
export function serverNode(): string {
  return process.env.BENCH_SERVER_NODE || process.execPath;
}

export async function startServerProcess(env: Record<string, string>, root = ROOT): Promise<ServerProcess> {
  const port = String(await freePort());
  // BENCH_SERVER_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`): flags for the server processes only.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(serverNode(), [...nodeArgs, '--import', 'tsx', path.join(root, 'src', 'main.ts'), 'serve'], {
    cwd: root,
    // The default log level (benchmark what deployments run): an access-log line per
    // request, written to /dev/null rather than into the benchmark's report.
    env: { ...process.env, LOG_LEVEL: 'info', METRICS_PORT: '0', PORT: port, HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`, ...env },
    stdio: ['ignore', process.env.BENCH_SERVER_LOG ? 'inherit' : 'ignore', 'inherit'], // BENCH_SERVER_LOG=1: the servers' log on stdout
  });
  const url = `http://127.0.0.1:${port}`;
  const until = Date.now() + 120000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    if (await ready(url)) break;
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    url,
    pid: child.pid as number,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

function ready(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    http.get(`${url}/readyz`, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    }).on('error', () => resolve(false));
  });
}

/**
 * The floor server (floor-server.ts) of a scenario in its own process, with `spec` as FLOOR_SPEC;
 * `env` gives DATABASE_URL / REDIS_URL when the floor replays statements or uses Redis.
 */
export async function startFloorServer(spec: unknown, env: Record<string, string> = {}): Promise<ServerProcess> {
  const fs = await import('node:fs');
  const os = await import('node:os');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-floor-')), 'spec.json');
  fs.writeFileSync(file, JSON.stringify(spec));
  const port = String(await freePort());
  const child: ChildProcess = spawn(serverNode(), ['--import', 'tsx', path.join(__dirname, 'floor-server.ts')], {
    cwd: ROOT,
    env: { ...process.env, ...env, FLOOR_SPEC: file, PORT: port },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`floor server exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => {
          fs.rmSync(path.dirname(file), { recursive: true, force: true });
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** A port nobody listens on now, chosen by the OS (a random pick once met a busy one). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
