import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { TlsPki } from '../test/helpers/tls-pki';
import { loadAverage } from './lib/cpu';
import { freePort, serverNode } from './lib/server';

const ROUNDS = 10;
const PER_ROUND = 300;
const NEW_CONNECTIONS = 100;
const ROOT = path.join(__dirname, '..');

/**
 * TLS 1.3 against plain HTTP: the same server (PGlite, guard off, no demo data) started twice,
 * once with TLS_CERT_FILE/TLS_KEY_FILE, measured in alternating rounds. Per request over one
 * kept-alive connection (what a client pays once its connection stands), and per request on a new
 * connection each time (the handshake included). Aim: TLS at most 1.2 x plain at p50 with the
 * connection reused (docs/requirements.md#configuration).
 */
export async function benchTls(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-tls-'));
  const pki = new TlsPki(path.join(dir, 'pki'), 'bench-ca');
  const leaf = pki.issue('server', { server: true });
  const ca = fs.readFileSync(pki.caPem);
  const plain = await start(dir, 'plain', {});
  const tls = await start(dir, 'tls', { TLS_CERT_FILE: leaf.cert, TLS_KEY_FILE: leaf.key });
  const floor = await startFloor(leaf);
  const rows: string[] = [];
  const measure = (name: string, urls: { plain: string; tls: string }, reuse: boolean) => alternating(urls, reuse, ca).then((m) => rows.push(`| ${name}, ${reuse ? 'connection kept alive' : 'a new connection per request'} | ${m}`));
  try {
    for (const [name, p] of [['`GET /healthz`', '/healthz'], ['`GET /fhir/metadata` (the CapabilityStatement)', '/fhir/metadata']] as const) {
      for (const reuse of [true, false]) await measure(name, { plain: plain.url + p, tls: tls.url + p }, reuse);
    }
    await measure('floor: a bare `node:http` and `node:https` server answering the `/healthz` bytes', floor.urls, true);
  } finally {
    await Promise.all([plain.stop(), tls.stop(), floor.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return [
    `Two server processes (PGlite, guard off, no demo data), plain HTTP and TLS 1.3 (P-256 certificate, one-level chain); requests one at a time, ${ROUNDS} alternating rounds of ${PER_ROUND} requests (kept alive) or ${NEW_CONNECTIONS} (new connections); load average ${loadAverage()} at the end.`,
    '',
    '| request | plain p50 ms | TLS 1.3 p50 ms | ratio TLS/plain (median of rounds) | per-round ratios |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    'Aim: at most 1.20 with the connection kept alive (a client keeps its connection; the handshake is paid once per connection, the rows with a new connection show what it costs). The floor row is what TLS 1.3 costs Node itself per request on this machine with a response that small: the encryption of each record and the TLS socket layer, with nothing of Terminus in it.',
  ].join('\n');
}

/** `ROUNDS` alternating rounds of plain and TLS requests: the table row's cells after the name. */
async function alternating(urls: { plain: string; tls: string }, reuse: boolean, ca: Buffer): Promise<string> {
  const ratios: number[] = [];
  const p50s = { plain: [] as number[], tls: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['plain', 'tls'] as const) : (['tls', 'plain'] as const);
    const got: Record<string, number> = {};
    for (const which of order) {
      got[which] = median(await timed(urls[which], reuse ? PER_ROUND : NEW_CONNECTIONS, reuse, ca));
      p50s[which].push(got[which]);
    }
    ratios.push(got.tls / got.plain);
  }
  return `${median(p50s.plain).toFixed(2)} | ${median(p50s.tls).toFixed(2)} | ${median(ratios).toFixed(2)} | ${ratios.map((r) => r.toFixed(2)).join(', ')} |`;
}

/** The floor servers (bench/lib/tls-floor.ts) on the servers' Node. */
async function startFloor(leaf: { cert: string; key: string }): Promise<{ urls: { plain: string; tls: string }; stop(): Promise<void> }> {
  const [port, tlsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(serverNode(), ['--import', 'tsx', path.join(__dirname, 'lib', 'tls-floor.ts')], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), TLS_PORT: String(tlsPort), TLS_CERT_FILE: leaf.cert, TLS_KEY_FILE: leaf.key },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`TLS floor server exited with ${code}`)));
  });
  return {
    urls: { plain: `http://127.0.0.1:${port}/`, tls: `https://127.0.0.1:${tlsPort}/` },
    stop: () => new Promise((resolve) => { child.once('exit', () => resolve()); child.kill('SIGTERM'); }),
  };
}

async function start(dir: string, name: string, env: Record<string, string>): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const scheme = env.TLS_CERT_FILE ? 'https' : 'http';
  const child: ChildProcess = spawn(serverNode(), ['--import', 'tsx', path.join(ROOT, 'src', 'main.ts'), 'serve'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', REDIS_URL: '', DATA_DIR: path.join(dir, name), DEMO_DATA: 'false', GUARD_ENFORCEMENT: 'off', LOG_LEVEL: 'warn', METRICS_PORT: '0', PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `${scheme}://127.0.0.1:${port}`, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `${scheme}://127.0.0.1:${port}`;
  const ca = env.TLS_CERT_FILE ? fs.readFileSync(path.join(dir, 'pki', 'bench-ca.pem')) : undefined;
  const until = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} server exited with ${child.exitCode}`);
    if ((await timed(`${url}/readyz`, 1, false, ca).then(() => true, () => false))) break;
    if (Date.now() > until) throw new Error(`${name} server not ready`);
    await new Promise((r) => setTimeout(r, 300));
  }
  return { url, stop: () => new Promise((resolve) => { child.once('exit', () => resolve()); child.kill('SIGTERM'); }) };
}

/** `n` requests one after the other; milliseconds each. */
async function timed(url: string, n: number, keepAlive: boolean, ca?: Buffer): Promise<number[]> {
  const secure = url.startsWith('https:');
  const agent = secure ? new https.Agent({ keepAlive, maxSockets: 1, ca }) : new http.Agent({ keepAlive, maxSockets: 1 });
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await new Promise<void>((resolve, reject) => {
        (secure ? https : http)
          .get(url, { agent, ...(secure ? { ca } : {}) }, (res) => {
            res.resume();
            res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${url}: ${res.statusCode}`))));
          })
          .on('error', reject);
      });
      out.push(performance.now() - t0);
    }
  } finally {
    agent.destroy();
  }
  return out;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
