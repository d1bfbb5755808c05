import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCardCa } from '../src/guard/pki/dev-pki';
import { runLoad, ms, type LoadResult } from './lib/load';
import { startServerProcess } from './lib/server';
import { authenticatedRequests, medianOf, prepareStore, type Next } from './pep';

const ROOT = path.join(__dirname, '..');
const CONNECTIONS = 32;
const ROUNDS = 6;
const ROUND_MS = 4_000;
const WARMUP_MS = 3_000;
const SCHEDULES = 20;

/**
 * This tree against a baseline revision (BENCH_BASELINE, default d556311: before the seams
 * refactor), in one run on one machine: the servers of both trees on copies of the same data,
 * measured in alternating rounds (the order flips each round) so machine load hits both alike.
 * Reported as the ratio this/baseline (median of the per-round ratios): 1.00 is "as fast".
 * Scenarios: the guarded slot search of the enforcement-point benchmark (token, proof, jti,
 * rate limit, scopes), and the unguarded month-window slot search of the search benchmark.
 */
export async function benchCompare(): Promise<string> {
  const rev = process.env.BENCH_BASELINE ?? 'd556311';
  const baseline = checkout(rev);
  const sections: string[] = [];
  try {
    sections.push(await compareOn(false, baseline.root, rev));
    if (process.env.DATABASE_URL) sections.push(await compareOn(true, baseline.root, rev));
  } finally {
    baseline.remove();
  }
  return [
    ...sections,
    'Reading: each ratio compares rounds run back to back on the same machine; where the per-round ratios fall on both sides of 1.00 the difference is within the noise of this shared 2-core machine (the load generator, four servers, the database and Redis share it).',
  ].join('\n\n');
}

/** The baseline revision as a worktree of its own, using this tree's node_modules. */
export function checkout(rev: string): { root: string; remove(): void } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-baseline-'));
  fs.rmSync(root, { recursive: true });
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', root, rev], { stdio: 'ignore' });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
  return {
    root,
    remove: () => execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', root], { stdio: 'ignore' }),
  };
}

async function compareOn(postgres: boolean, baselineRoot: string, rev: string): Promise<string> {
  // Two stores, each loaded with the same data: one for the unguarded pair, one for the guarded pair.
  const off = await prepareStore(postgres);
  const offEnvs = await copies(off, postgres);
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-ca-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const common = {
    DEMO_DATA: 'false',
    CARD_TRUST_ANCHORS: anchors,
    RATE_LIMIT_FHIR_PER_CLIENT: '100000000',
    RATE_LIMIT_PER_IP: '100000',
    // Servers sharing a PostgreSQL database open each other's signing keys.
    GUARD_KEY_SECRET: 'bench-compare-secret-of-at-least-32-characters',
  };
  const servers = {
    // The baseline serves a store migrated by this tree; its only schema difference is the outbox's
    // name (migrations/400_outbox.sql), so the baseline's idle delivery loop fails once a second:
    // silenced, it costs one failing query a second, nothing on the measured requests.
    baseOff: await startServerProcess({ ...offEnvs[0], ...common, GUARD_ENFORCEMENT: 'off', LOG_LEVEL: 'fatal' }, baselineRoot),
    headOff: await startServerProcess({ ...offEnvs[1], ...common, GUARD_ENFORCEMENT: 'off' }),
    baseOn: await startServerProcess({ ...offEnvs[2], ...common, GUARD_ENFORCEMENT: 'on', LOG_LEVEL: 'fatal' }, baselineRoot),
    headOn: await startServerProcess({ ...offEnvs[3], ...common, GUARD_ENFORCEMENT: 'on' }),
  };
  try {
    const monthNext: Next = (_c, n) => ({ path: monthQuery(n), headers: { accept: 'application/fhir+json' } });
    const rows = [
      await pair('`Slot?schedule&status=free&start` (31 days, `_count=50`), guard off: search', servers.baseOff.url, servers.headOff.url, monthNext, monthNext),
      await pair(
        '`Slot?...` (one day, `_count=10`), guard on: enforcement point + search',
        servers.baseOn.url,
        servers.headOn.url,
        await authenticatedRequests(servers.baseOn.url, ca, 120_000),
        await authenticatedRequests(servers.headOn.url, ca, 120_000),
      ),
    ];
    const load = os.loadavg()[0].toFixed(1);
    return [
      `Store: ${off.store}; 20,000 Slots in 20 Schedules, migrated by this tree; baseline \`${rev}\` and this tree each serve their own copy; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per tree after a ${WARMUP_MS / 1000} s warm-up, alternating; machine: ${os.cpus().length} cores, load average ${load} at the end.`,
      '',
      '| scenario | baseline req/s | this req/s | ratio this/baseline (median of rounds) | per-round ratios | baseline p50 ms | this p50 ms |',
      '|---|---|---|---|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    await off.cleanup();
    for (const env of offEnvs.slice(2)) if (env.DATA_DIR) fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
  }
}

/** Four server environments on the same data: PGlite needs a directory each, PostgreSQL shares the database. */
async function copies(store: Awaited<ReturnType<typeof prepareStore>>, postgres: boolean): Promise<Record<string, string>[]> {
  if (postgres) return [store.env, store.env, store.env, store.env];
  const extra = [2, 3].map((i) => {
    const dir = `${store.env.DATA_DIR}-copy${i}`;
    fs.cpSync(store.env.DATA_DIR, dir, { recursive: true });
    return { ...store.env, DATA_DIR: dir };
  });
  return [store.env, store.envCopy, ...extra];
}

async function pair(name: string, baseUrl: string, headUrl: string, baseNext: Next, headNext: Next): Promise<string> {
  await runLoad({ baseUrl, connections: CONNECTIONS, durationMs: WARMUP_MS, next: baseNext });
  await runLoad({ baseUrl: headUrl, connections: CONNECTIONS, durationMs: WARMUP_MS, next: headNext });
  const base: LoadResult[] = [];
  const head: LoadResult[] = [];
  const once = (url: string, next: Next) => runLoad({ baseUrl: url, connections: CONNECTIONS, durationMs: ROUND_MS, next, expectStatus: (s) => s === 200 });
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      base.push(await once(baseUrl, baseNext));
      head.push(await once(headUrl, headNext));
    } else {
      head.push(await once(headUrl, headNext));
      base.push(await once(baseUrl, baseNext));
    }
  }
  const ratios = base.map((b, i) => head[i].rps / b.rps);
  const median = [...ratios].sort((x, y) => x - y)[Math.floor(ratios.length / 2)];
  const b = medianOf(base);
  const h = medianOf(head);
  const errors = b.errors + h.errors;
  return `| ${name}${errors ? ` (${errors} errors)` : ''} | ${Math.round(b.rps)} | ${Math.round(h.rps)} | ${median.toFixed(2)} | ${ratios.map((x) => x.toFixed(2)).join(', ')} | ${ms(b.p50)} | ${ms(h.p50)} |`;
}

function monthQuery(n: number): string {
  const schedule = (n % SCHEDULES) + 1;
  return `/fhir/Slot?schedule=Schedule/bench-s-${schedule}&status=free&start=ge2030-01-01T00:00:00Z&start=le2030-01-31T23:59:59Z&_count=50`;
}

