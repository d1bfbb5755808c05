/**
 * `npm run fuzz -- [--cases N] [--seed S] [--store pg|pglite|both]`: the seeded fuzz run of issue 16
 * against each store (PostgreSQL when DATABASE_URL is set, PGlite always), printing one JSON report
 * per store and every finding with the seed and index that replay it (`fuzzCase(seed, index)`).
 * Exits 1 when any case found a 5xx, no answer, or an error body of the wrong shape.
 */
import { fuzzCase } from './cases';
import { runFuzz, send, startFuzzTarget } from './run';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

async function main(): Promise<void> {
  const cases = Number(arg('cases', '10000'));
  const seed = Number(arg('seed', '1'));
  const which = arg('store', 'both');
  const stores = [...(process.env.DATABASE_URL && which !== 'pglite' ? [false] : []), ...(which !== 'pg' ? [true] : [])];
  let failed = false;
  const replay = arg('replay', '');
  if (replay) {
    // `--replay SEED:INDEX[:g],...`: those cases alone, with the server's error log on stderr.
    for (const pglite of stores) {
      const target = await startFuzzTarget({ pglite, logLevel: 'error' });
      try {
        for (const spec of replay.split(',')) {
          const [s, i, g] = spec.split(':');
          const c = fuzzCase(Number(s), Number(i), g === 'g');
          const r = await send(g === 'g' ? target.guardedUrl : target.url, c, 30_000);
          process.stdout.write(`${target.store} ${spec}: ${c.method} ${c.path.slice(0, 500)}\n  headers ${JSON.stringify(c.headers).slice(0, 500)}\n  body ${c.body?.toString('utf8').slice(0, 3000)}\n  -> ${r.status} ${r.body.slice(0, 500)}\n`);
        }
      } finally {
        await target.close();
      }
    }
    return;
  }
  for (const pglite of stores) {
    const target = await startFuzzTarget({ pglite });
    try {
      const report = await runFuzz(target, { seed, cases, onProgress: (done) => process.stderr.write(`${target.store}: ${done}/${cases}\n`) });
      process.stdout.write(`${JSON.stringify({ ...report, findings: report.findings.length })}\n`);
      for (const f of report.findings) process.stdout.write(`  finding ${JSON.stringify(f)}\n`);
      failed ||= report.findings.length > 0;
    } finally {
      await target.close();
    }
  }
  process.exit(failed ? 1 : 0);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(2);
});
