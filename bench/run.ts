import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { benchBook } from './book';
import { benchCompare } from './compare';
import { benchGuard } from './guard';
import { benchPep } from './pep';
import { benchSearch } from './search';
import { benchSubscriptions } from './subscriptions';
import { benchTpm } from './tpm';
import { benchClient } from './client';
import { benchAsl } from './asl';
import { benchStart } from './start';
import { benchTls } from './tls';
import { benchKonnektor } from './konnektor';
import { benchVolume } from './volume';
import { benchAudit } from './audit';
import { benchReplicas } from './replicas';
import { benchCurve } from './curve';
import { serverNode } from './lib/server';

/**
 * `npm run bench [name...]`: runs the named benchmarks (all by default) and rewrites their
 * sections of bench/RESULTS.md, leaving the other sections as they were.
 */
const BENCHES: Record<string, { title: string; run: () => Promise<string> }> = {
  search: { title: 'FHIR search', run: benchSearch },
  book: { title: 'Booking: $book on distinct free slots', run: benchBook },
  guard: { title: 'Access guard: discovery, nonce, token exchange, refresh', run: benchGuard },
  subscriptions: { title: 'Subscriptions: fan-out of one event to 1,000 rest-hook subscriptions', run: benchSubscriptions },
  pep: { title: 'Enforcement point: guarded vs unguarded slot search', run: benchPep },
  client: { title: 'Reference client: stress search and book through the library, client overhead per request', run: benchClient },
  tpm: { title: 'Hardware attestation: TPM registration and token exchange beside the software posture', run: benchTpm },
  asl: { title: 'Additional security layer: handshake, one frame, a slot search through the tunnel', run: benchAsl },
  start: { title: 'Cold start: the first requests of a fresh process against warm ones', run: benchStart },
  tls: { title: 'TLS 1.3 against plain HTTP: per request on a kept-alive connection and on a new one', run: benchTls },
  konnektor: { title: 'The TI client paths: a login signed by the SMC-B behind a Konnektor, and the local signing proxy', run: benchKonnektor },
  audit: { title: 'Audit trail: the guarded slot search and $book with AUDIT_MODE=off and sync, bytes per audited request', run: benchAudit },
  replicas: { title: 'Read replicas: the guarded slot search with its reads on a streaming replica against the primary alone', run: benchReplicas },
  volume: { title: 'Volume: realistic calendars loaded at growing sizes, bytes per stored slot, retiring past slots', run: benchVolume },
  curve: { title: 'Volume curve: search, $book, cancel, fan-out and a cache-cold search as the store grows', run: benchCurve },
  compare: { title: 'This tree against a baseline revision: enforcement point and search (same run)', run: benchCompare },
};

/** The Node versions of the run: the servers' and floors' (BENCH_SERVER_NODE), and the load generator's when it differs. */
function runtimes(): string {
  const servers = serverNode() === process.execPath ? process.version : execFileSync(serverNode(), ['--version'], { encoding: 'utf8' }).trim();
  return servers === process.version ? `${servers} (the servers, floors and load generator alike)` : `${servers} (the servers and floors; the load generator on ${process.version})`;
}

async function main(): Promise<void> {
  // `compare` needs a baseline revision and runs on request only.
  const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(BENCHES).filter((n) => n !== 'compare');
  const file = path.join(__dirname, 'RESULTS.md');
  let doc = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n\nWritten by `npm run bench`; each section is replaced when its benchmark runs.\n';
  for (const name of names) {
    const bench = BENCHES[name];
    if (!bench) throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
    process.stdout.write(`running ${name}...\n`);
    const body = await bench.run();
    const section = `<!-- bench:${name} -->\n## ${bench.title}\n\nMeasured ${new Date().toISOString().slice(0, 16)}Z on Node ${runtimes()}.\n\n${body}\n<!-- /bench:${name} -->`;
    const re = new RegExp(`<!-- bench:${name} -->[\\s\\S]*?<!-- /bench:${name} -->`);
    doc = re.test(doc) ? doc.replace(re, section) : `${doc.trimEnd()}\n\n${section}\n`;
    fs.writeFileSync(file, doc);
    process.stdout.write(`${body}\n`);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
