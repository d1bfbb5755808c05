/**
 * `npm run fuzz -- [--cases N] [--seed S] [--store pg|pglite|both] [--concurrency C] [--out FILE]`:
 * the seeded fuzz run against each store (PostgreSQL when DATABASE_URL is set, with
 * Redis when REDIS_URL is set; PGlite always), every case through the enforcing guard with its credentials (sessions of every kind,
 * flawed, broken, none). Prints one JSON report per store, its findings grouped by cause (the
 * server's logged error), and the first findings of each cause with the seed and index that
 * replay them; `--out` writes every finding as a JSON line.
 *
 * `--replay SEED:INDEX,...` sends those cases alone and prints each case, the answer and the
 * server's log lines for it (error and stack).
 *
 * Exits 1 when any case found a 5xx, no answer, an error body of the wrong shape, or a valid
 * session refused.
 */
import fs from 'node:fs';
import { fuzzCase } from './cases';
import { inFlight, rootOf, runFuzz, send, startFuzzTarget, wireRequest } from './run';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

/** Non-ASCII and control characters of a path or header as \xNN (the bytes on the wire). */
const shown = (s: string) => s.replace(/[^\x20-\x7e]/g, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`);

async function replay(stores: boolean[], specs: string[]): Promise<void> {
  for (const pglite of stores) {
    const target = await startFuzzTarget({ pglite });
    try {
      for (const spec of specs) {
        const [s, i] = spec.split(':');
        const c = fuzzCase(Number(s), Number(i));
        const wire = wireRequest(target, c);
        inFlight.add(spec);
        const r = await send(target, c, 30_000);
        inFlight.delete(spec);
        const headers = Object.fromEntries(Object.entries(wire.headers).map(([k, v]) => [k, k === 'authorization' || k === 'dpop' ? '…' : shown(String(v)).slice(0, 300)]));
        process.stdout.write(`${target.store} ${spec} (${JSON.stringify(c.auth)}): ${c.method} ${shown(c.path).slice(0, 1000)}\n  headers ${JSON.stringify(headers)}\n  body ${c.body ? shown(c.body.toString('latin1')).slice(0, 3000) : '-'}\n  -> ${r.status} ${r.body.slice(0, 500)}\n`);
        for (const entry of r.log) process.stdout.write(`  log ${JSON.stringify(entry, null, 2).replace(/\\n/g, '\n    ')}\n`);
      }
    } finally {
      await target.close();
    }
  }
}

async function main(): Promise<void> {
  const cases = Number(arg('cases', '10000'));
  const seed = Number(arg('seed', '1'));
  const concurrency = Number(arg('concurrency', '4'));
  const which = arg('store', 'both');
  const out = arg('out', '');
  const stores = [...(process.env.DATABASE_URL && which !== 'pglite' ? [false] : []), ...(which !== 'pg' ? [true] : [])];
  const specs = arg('replay', '');
  if (specs) return replay(stores, specs.split(','));
  if (out) fs.writeFileSync(out, '');
  let failed = false;
  for (const pglite of stores) {
    const target = await startFuzzTarget({ pglite });
    try {
      const report = await runFuzz(target, {
        seed,
        cases,
        concurrency,
        progressEvery: Math.max(500, Math.floor(cases / 20)),
        onProgress: (done, findings) => process.stderr.write(`${target.store}: ${done}/${cases}, ${findings} findings\n`),
      });
      const { findings, roots, ...summary } = report;
      process.stdout.write(`${JSON.stringify({ ...summary, findings: findings.length, causes: roots.length })}\n`);
      for (const root of roots) {
        process.stdout.write(`  cause (${root.count}x, ${JSON.stringify(root.statuses)}): ${root.cause}\n    replay ${root.replay}: ${shown(root.example)}\n`);
        for (const f of findings.filter((x) => rootOf(x) === root.cause).slice(0, 3)) process.stdout.write(`    finding ${shown(JSON.stringify(f))}\n`);
      }
      if (out) fs.appendFileSync(out, findings.map((f) => `${JSON.stringify({ store: target.store, ...f })}\n`).join(''));
      failed ||= findings.length > 0;
    } finally {
      await target.close();
    }
  }
  process.exit(failed ? 1 : 0);
}

// The server runs in this process: an error it does not catch ends the run, naming the cases in flight.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (err: unknown) => {
    process.stderr.write(`${event} with cases in flight ${[...inFlight].join(',')} (replay them with --replay):\n${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(3);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(2);
});
