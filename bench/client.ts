/**
 * Reference client benchmark: `terminus-client stress search` and `book` through the
 * client library against `terminus serve` (embedded; PostgreSQL too when DATABASE_URL is set), and
 * the client's own overhead per request (token lookup and a DPoP proof with `ath`) against its
 * floor, one ES256 signature with node:crypto, in the same run.
 *
 *   node --import tsx bench/run.ts client
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient, runStress, type StressReport } from '../src/client';
import { createDevPki, writeDevPki } from '../src/guard/pki/dev-pki';
import { Pool } from 'pg';
import { startServerProcess } from './lib/server';

const DURATION_S = Number(process.env.BENCH_CLIENT_S ?? 10);
const CONCURRENCY = 8;

export async function benchClient(): Promise<string> {
  const rows: string[] = [];
  for (const postgres of process.env.DATABASE_URL ? [false, true] : [false]) {
    const store = await emptyStore(postgres);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-client-'));
    writeDevPki(path.join(dir, 'pki'), createDevPki());
    // The demo calendars (bookable slots of the next 30 days) in an empty store.
    const server = await startServerProcess({ ...store.env, CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), RATE_LIMIT_PER_IP: '100000000', RATE_LIMIT_PER_CLIENT: '100000000', RATE_LIMIT_FHIR_PER_CLIENT: '100000000', DEMO_DATA: 'true' });
    try {
      const session = await createClient({ server: server.url, card: path.join(dir, 'pki', 'card-p256.pem'), key: path.join(dir, 'pki', 'card-p256.key.pem'), home: path.join(dir, 'home'), password: 'bench-passphrase-of-terminus' });
      for (const scenario of ['search', 'book'] as const) {
        const r = await runStress(session, scenario, { durationSec: DURATION_S, concurrency: CONCURRENCY });
        rows.push(row(store.name, r));
      }
      session.close();
    } finally {
      await server.stop();
      await store.cleanup();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  // Client overhead per request, in process: sign a request (cached token, fresh proof) vs one ES256 signature.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-client-sign-'));
  const overhead = await signingOverhead(dir);
  fs.rmSync(dir, { recursive: true, force: true });
  return [
    `\`runStress\` (what \`terminus-client stress\` runs) with ${CONCURRENCY} workers for ${DURATION_S} s against \`terminus serve\` in its own process (rate limits lifted, keep-alive fetch); machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}. \`book\` stops when the free slots of one calendar run out. Figures beside \`bench/\`: the pep section measures the same guarded search without the client library.`,
    '',
    '| store | scenario | requests | req/s | p50 ms | p95 ms | p99 ms | errors |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    '| client overhead per request (in process) | µs | floor: one ES256 signature | ratio |',
    '|---|---|---|---|',
    `| token lookup + DPoP proof with \`ath\` (\`requestSigner\`) | ${overhead.sign.toFixed(1)} | ${overhead.floor.toFixed(1)} | ${(overhead.sign / overhead.floor).toFixed(2)} |`,
    '',
    `Target: the client's own overhead per request under 0.3 ms: ${overhead.sign < 300 ? 'met' : 'not met'} in this run (${(overhead.sign / 1000).toFixed(3)} ms).`,
  ].join('\n');
}

function row(store: string, r: StressReport): string {
  return `| ${store} | ${r.scenario} | ${r.requests} | ${r.rps} | ${r.p50_ms} | ${r.p95_ms} | ${r.p99_ms} | ${Object.keys(r.errors).length ? JSON.stringify(r.errors) : 0} |`;
}

async function signingOverhead(dir: string): Promise<{ sign: number; floor: number }> {
  // A session with a token in hand (far from expiry) signs without talking to any server.
  const pki = createDevPki();
  const session = await createClient({ server: 'http://127.0.0.1:9', card: pki.cards[0].certPem, key: pki.cards[0].keyPem, home: dir, password: 'bench-passphrase-of-terminus' });
  const key = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const { ecKeyFrom } = await import('../src/client/crypto');
  session.guard.dpopKey = await ecKeyFrom(key.privateKey);
  session.guard.tokens = { accessToken: 'x'.repeat(600), refreshToken: 'r', expiresAt: Math.floor(Date.now() / 1000) + 3600, expiresIn: 3600, scope: '', raw: {} };
  const rounds = (f: () => Promise<unknown> | unknown, n: number) => async () => {
    const times: number[] = [];
    for (let r = 0; r < 5; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) await f();
      times.push(Number(process.hrtime.bigint() - t0) / 1000 / n);
    }
    return times.sort((a, b) => a - b)[2];
  };
  const sign = await rounds(() => session.requestSigner('http://127.0.0.1:9/fhir/Slot?_count=20', { method: 'GET', headers: new Headers() }), 2000)();
  const data = Buffer.alloc(300, 1);
  const floor = await rounds(() => crypto.sign('sha256', data, { key: key.privateKey, dsaEncoding: 'ieee-p1363' }), 2000)();
  session.close();
  return { sign, floor };
}

/** A fresh PGlite folder, or a fresh PostgreSQL database next to DATABASE_URL's. */
async function emptyStore(postgres: boolean): Promise<{ env: Record<string, string>; name: string; cleanup(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (postgres && base) {
    const admin = new Pool({ connectionString: base, max: 1 });
    await admin.query('DROP DATABASE IF EXISTS terminus_bench_client WITH (FORCE)');
    await admin.query('CREATE DATABASE terminus_bench_client');
    await admin.end();
    const url = new URL(base);
    url.pathname = '/terminus_bench_client';
    return {
      env: { DATABASE_URL: url.toString(), ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}) },
      name: `PostgreSQL${process.env.REDIS_URL ? ' + Redis' : ''}`,
      cleanup: async () => {
        const a = new Pool({ connectionString: base, max: 1 });
        await a.query('DROP DATABASE IF EXISTS terminus_bench_client WITH (FORCE)').catch(() => undefined);
        await a.end();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-client-store-'));
  return { env: { DATA_DIR: dir, DATABASE_URL: '', REDIS_URL: '' }, name: 'PGlite (embedded)', cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }) };
}
