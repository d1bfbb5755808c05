import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/**
 * Starts `terminus serve` in a child process (its own core) at the default log level and waits
 * until /readyz answers;
 * `root`: another checkout of the project (a baseline revision to compare with).
 */
export async function startServerProcess(env: Record<string, string>, root = ROOT): Promise<{ url: string; stop(): Promise<void> }> {
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'main.ts'), 'serve'], {
    cwd: root,
    // The default log level (issue 15: benchmark what deployments run): an access-log line per
    // request, written to /dev/null rather than into the benchmark's report.
    env: { ...process.env, LOG_LEVEL: 'info', PORT: port, HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
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
