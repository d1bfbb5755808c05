import fs from 'node:fs';
import { ConfigError, type Config } from '../config';
import { exportAuditEvents, verifyAuditTrail } from '../audit';
import { auditSigner, CheckpointKeyUnavailable } from '../guard';
import { createContext } from '../server';
import type { AppContext } from '../context';

const USAGE = `usage: terminus audit verify [--since DATE]
       terminus audit export --since DATE [--until DATE] [--proof FILE]
  DATE: an ISO date or instant (2026-11-01, 2026-11-01T08:00:00Z); --until is exclusive`;

/**
 * `terminus audit verify`: walks the hash chains and signed checkpoints; exit 0 with the count,
 * 1 naming the first AuditEvent altered, removed or inserted, 2 for anything else.
 * `terminus audit export`: the AuditEvents of a period as FHIR NDJSON on stdout, oldest first;
 * `--proof FILE` writes each one's place in its chain and the checkpoints beside it.
 */
export async function runAudit(config: Config, args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  let options: Map<string, string>;
  try {
    options = parseOptions(rest, sub === 'export' ? ['--since', '--until', '--proof', '--format'] : ['--since']);
  } catch (err) {
    process.stderr.write(`terminus audit: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (sub !== 'verify' && sub !== 'export') {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const since = dateOption(options, '--since');
  const until = dateOption(options, '--until');
  if (sub === 'export' && !since) {
    process.stderr.write(`terminus audit export: --since is required\n${USAGE}\n`);
    return 2;
  }
  if (options.has('--format') && options.get('--format') !== 'ndjson') {
    process.stderr.write(`terminus audit export: --format ${options.get('--format')}: only ndjson is written\n`);
    return 2;
  }
  const ctx = await open(config);
  try {
    return sub === 'verify' ? await verify(ctx, since) : await exportEvents(ctx, since!, until, options.get('--proof'));
  } finally {
    await ctx.db.close();
    ctx.redis?.disconnect();
  }
}

async function verify(ctx: AppContext, since: Date | undefined): Promise<number> {
  try {
    const result = await verifyAuditTrail(ctx.db, auditSigner(ctx), { since });
    if (!result.ok) {
      process.stderr.write(`terminus audit verify: ${result.problem}\n`);
      process.stdout.write(`${result.count} audit events checked before the first problem; the trail is not intact\n`);
      return 1;
    }
    process.stdout.write(`${result.count} audit events verified\n`);
    return 0;
  } catch (err) {
    if (err instanceof CheckpointKeyUnavailable) throw new ConfigError('GUARD_KEY_SECRET', err.message);
    throw err;
  }
}

async function exportEvents(ctx: AppContext, since: Date, until: Date | undefined, proofFile: string | undefined): Promise<number> {
  const proof = proofFile ? fs.createWriteStream(proofFile) : undefined;
  const write = (stream: NodeJS.WritableStream, text: string) => new Promise<void>((resolve, reject) => (stream.write(text) ? resolve() : stream.once('drain', resolve).once('error', reject)));
  const n = await exportAuditEvents(ctx.db, { since, until }, async (line, place) => {
    await write(process.stdout, `${line}\n`);
    if (proof) await write(proof, `${JSON.stringify(place)}\n`);
  });
  if (proof) {
    const { rows } = await ctx.db.query<{ id: string; made_at: Date; jws: string }>('SELECT id::text AS id, made_at, jws FROM audit_checkpoint ORDER BY id');
    for (const cp of rows) await write(proof, `${JSON.stringify({ checkpoint: cp.id, made_at: cp.made_at.toISOString(), jws: cp.jws })}\n`);
    await new Promise<void>((resolve, reject) => proof.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
  process.stderr.write(`${n} audit events exported\n`);
  return 0;
}

async function open(config: Config): Promise<AppContext> {
  return createContext({ ...config, demoData: false }).catch((err: unknown) => {
    // A running embedded server holds DATA_DIR (PGlite has one user): stop it first.
    if (err instanceof ConfigError && err.variable === 'DATA_DIR' && /in use by process/.test(err.message)) {
      throw new ConfigError('DATA_DIR', `${err.message.replace(/^DATA_DIR: /, '')} (a running server): stop it first, then run terminus audit again`);
    }
    throw err;
  });
}

function parseOptions(args: string[], known: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const [name, inline] = args[i].split(/=(.*)/s, 2);
    if (!known.includes(name)) throw new Error(`unknown option ${args[i]}`);
    const value = inline ?? args[++i];
    if (value === undefined) throw new Error(`${name} needs a value`);
    out.set(name, value);
  }
  return out;
}

function dateOption(options: Map<string, string>, name: string): Date | undefined {
  const v = options.get(name);
  if (v === undefined) return undefined;
  const t = /^\d{4}-\d{2}-\d{2}$/.test(v) ? Date.parse(`${v}T00:00:00Z`) : Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(t)) throw new ConfigError(name, `"${v}" is not an ISO date or instant`);
  return new Date(t);
}
