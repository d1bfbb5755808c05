import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCardCa } from '../src/guard/pki/dev-pki';
import { startReplicatedCluster } from '../test/helpers/pg-replica';
import { loadAverage } from './lib/cpu';
import { ms, type LoadResult } from './lib/load';
import { freePort, startServerProcess, type ServerProcess } from './lib/server';
import { authenticatedRequests, medianOf, prepareStore, rotatingRounds } from './pep';

const CONNECTIONS = 32;
const ROUNDS = 5;
const ROUND_MS = 4_000;
const WARMUP_MS = 3_000;

/**
 * Reads on a PostgreSQL streaming replica (DATABASE_READ_URL): the guarded slot search of the
 * enforcement-point benchmark against one server reading from the primary alone and one whose
 * callers' searches go to a replica, on a primary and a replica made for the run (two clusters on
 * this machine, pg_basebackup), in rotating rounds of the same run.
 */
export async function benchReplicas(): Promise<string> {
  const cluster = await startReplicatedCluster();
  const saved = process.env.DATABASE_URL;
  // prepareStore makes its database on the server DATABASE_URL names: here the run's primary, and
  // with it on the replica.
  process.env.DATABASE_URL = cluster.primaryUrl;
  const servers: ServerProcess[] = [];
  const ca = createCardCa();
  const anchors = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-bench-replicas-')), 'card-ca.pem');
  fs.writeFileSync(anchors, ca.certPem);
  const loadAtStart = loadAverage();
  try {
    const store = await prepareStore(true);
    await cluster.caughtUp();
    const replica = new URL(cluster.replicaUrl);
    replica.pathname = new URL(store.env.DATABASE_URL).pathname;
    const common = { ...store.env, DEMO_DATA: 'false', CARD_TRUST_ANCHORS: anchors, RATE_LIMIT_FHIR_PER_CLIENT: '100000000', RATE_LIMIT_PER_IP: '100000', GUARD_ENFORCEMENT: 'on' };
    const scenarios = [];
    const metricsPorts: number[] = [];
    for (const [name, cache] of [
      ['window cache (default)', {}],
      ['no cache (`SEARCH_CACHE_ENTRIES=0`)', { SEARCH_CACHE_ENTRIES: '0' }],
    ] as const) {
      const none = await startServerProcess({ ...common, ...cache });
      metricsPorts.push(await freePort());
      const one = await startServerProcess({ ...common, ...cache, DATABASE_READ_URL: replica.toString(), METRICS_HOST: '127.0.0.1', METRICS_PORT: String(metricsPorts.at(-1)) });
      servers.push(none, one);
      scenarios.push(
        { name: `guarded slot search, ${name}, primary only`, server: none, next: await authenticatedRequests(none.url, ca, 200_000) },
        { name: `guarded slot search, ${name}, one replica`, server: one, next: await authenticatedRequests(one.url, ca, 200_000) },
      );
    }
    const measured = await rotatingRounds(scenarios, CONNECTIONS, ROUND_MS, true);
    const where = await readsBy(metricsPorts);
    const routed = scenarios.reduce((n, _sc, i) => (i % 2 === 1 ? n + measured[i].runs.reduce((s, r) => s + r.requests, 0) : n), 0);
    const rows = scenarios.map((sc, i) => {
      const m = medianOf(measured[i].runs);
      const cpu = measured[i].cpu;
      const median = (k: string) => [...cpu.map((c) => c[k] ?? 0)].sort((a, b) => a - b)[Math.floor(cpu.length / 2)];
      const ratio = i % 2 === 1 ? ` ${against(measured[i].runs, measured[i - 1].runs)}` : ' –';
      return `| ${sc.name} | ${m.requests} | ${m.rps.toFixed(0)} | ${ms(m.p50)} | ${ms(m.p99)} | ${m.errors} | ${median('server').toFixed(2)} / ${median('postgres').toFixed(2)} |${ratio} |`;
    });
    await store.cleanup();
    return [
      `**PostgreSQL primary and one streaming replica on this machine${process.env.REDIS_URL ? ' + Redis' : ''}.** The guarded slot search of the enforcement-point benchmark (32 institutions, a fresh DPoP proof per request, \`Slot?schedule=X&status=free&start=ge..&start=le..&_count=10\`), one server reading from the primary only and one with \`DATABASE_READ_URL\` naming the replica, each in its own process on the same data; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${ROUND_MS / 1000} s per scenario after a ${WARMUP_MS / 1000} s warm-up, rotating order; the median round. Both clusters, the servers and the load generator share the machine's ${os.cpus().length} cores. Load average ${loadAtStart} at the start, ${loadAverage()} at the end.`,
      '',
      '| scenario | requests | req/s | p50 ms | p99 ms | errors | CPU ms per request: server / PostgreSQL (both clusters) | one replica against primary only (median of rounds; per round) |',
      '|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `The servers with a replica ran ${where.replica.toLocaleString('en')} reads there and ${where.primary.toLocaleString('en')} on the primary (\`terminus_db_reads_total\`, warm-up included) for the ${routed.toLocaleString('en')} searches measured.`,
      '',
      'Reading: a replica adds capacity where the primary is the bottleneck and the replica runs on hardware of its own. Here both clusters share the two cores with the servers and the load generator, so the run shows what the routing itself costs (the look at WAL positions every 200 ms, a pool per replica, the same statements on another server), not the capacity a replica on its own machine adds.',
    ].join('\n');
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    process.env.DATABASE_URL = saved;
    cluster.stop();
    fs.rmSync(path.dirname(anchors), { recursive: true, force: true });
  }
}

/** Where the servers' reads ran, from their metrics (terminus_db_reads_total). */
async function readsBy(ports: number[]): Promise<{ replica: number; primary: number }> {
  const out = { replica: 0, primary: 0 };
  for (const port of ports) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const m of text.matchAll(/^terminus_db_reads_total\{target="(replica|primary)"\} (\d+)/gm)) out[m[1] as 'replica' | 'primary'] += Number(m[2]);
  }
  return out;
}

function against(on: LoadResult[], off: LoadResult[]): string {
  const per = on.map((r, k) => r.rps / off[k].rps);
  const median = [...per].sort((a, b) => a - b)[Math.floor(per.length / 2)];
  return `**${median.toFixed(2)}** (${per.map((x) => x.toFixed(2)).join(', ')})`;
}
