#!/usr/bin/env node
// First: tracing instruments http, express, pg and ioredis as they load (OTEL_* variables).
import { stopTracing } from './tracing';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from './config';
import { projectPath } from './server-lib/paths';
import type { createLogger } from './logger';

// The application (FHIR definitions, the store, the guard) loads only for a command that uses it,
// after the configuration is read: `--version`, help and a bad setting answer at once.
const application = () => import('./server');

const USAGE = `usage: terminus <command>
  serve               serve everything on PORT (default)
  --version           print the version and exit
  migrate             apply database migrations and exit
  import FILE...      load FHIR Bundles or resources, keeping ids
  workload-token --sub S --aud A [--aud A2] [--ttl N]
                      print a workload token of this guard (another guard exchanges it)
  dev-pki DIR         write a development card PKI as PEM
  audit verify [--since DATE]
                      check the audit trail's hash chains and signed checkpoints
  audit export --since DATE [--until DATE] [--proof FILE]
                      write the AuditEvents of a period as FHIR NDJSON`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve', ...args] = argv;
  if (['-h', '--help', 'help', 'dev-pki', '--version', '-v'].includes(command)) return runWithoutConfig(command, args);
  if (!['serve', 'migrate', 'import', 'workload-token', 'audit'].includes(command)) {
    process.stderr.write(`terminus: unknown command "${command}"\n${USAGE}\n`);
    return 2;
  }
  const config = loadConfig();
  switch (command) {
    case 'serve':
      return serve(config);
    case 'migrate': {
      // openStore applies the migrations; the lock on DATA_DIR is held until close.
      const db = await (await application()).openStore(config);
      await db.close();
      process.stdout.write(db.applied.length ? `applied ${db.applied.join(', ')}\n` : 'schema up to date\n');
      return 0;
    }
    case 'workload-token':
      return (await import('./cli/workload-token')).runWorkloadToken(config, args);
    case 'audit':
      return (await import('./cli/audit')).runAudit(config, args);
    default:
      return (await import('./cli/import')).runImport(config, args);
  }
}

async function runWithoutConfig(command: string, args: string[]): Promise<number> {
  if (command === 'dev-pki') return (await import('./cli/dev-pki')).runDevPki(args);
  if (command === '--version' || command === '-v') {
    process.stdout.write(`${(JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8')) as { version: string }).version}\n`);
    return 0;
  }
  process.stdout.write(`${USAGE}\n`);
  return 0;
}

async function serve(config: Config): Promise<number> {
  const logger = (await import('./logger')).createLogger(config.logLevel, config.logFormat);
  // The server answers `terminus workload-token` of this machine (workload-socket.ts).
  const server = await (await application()).startServer(config, undefined, { workloadSocket: true });
  logger.info({ url: server.url, publicUrl: config.publicUrl, store: server.ctx.db.kind, metrics: server.metricsUrl ?? 'off' }, 'terminus listening');
  logDevelopmentCards(config, logger);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down: finishing in-flight requests');
      server.close().then(resolve, resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await stopTracing().catch((err: unknown) => logger.warn({ err: String(err) }, 'traces not flushed'));
  logger.info('stopped');
  return 0;
}

/**
 * Without CARD_TRUST_ANCHORS the embedded server trusts its generated development cards: say where
 * they are and how the reference client logs in with them (README "Use it").
 */
function logDevelopmentCards(config: Config, logger: ReturnType<typeof createLogger>): void {
  const dir = path.join(config.dataDir, 'dev-pki');
  const list = path.join(dir, 'cards.json');
  if (config.cardTrustAnchors || config.databaseUrl || !fs.existsSync(list)) return;
  const cards = JSON.parse(fs.readFileSync(list, 'utf8')) as { cert: string; key: string; telematikId: string }[];
  const first = cards[0];
  logger.info(
    {
      publicUrl: config.publicUrl,
      cards: cards.map((c) => ({ telematikId: c.telematikId, cert: path.join(dir, c.cert), key: path.join(dir, c.key) })),
      repositoryOwners: config.repositoryOwners,
    },
    `development cards in ${dir}; log in with (node_modules/.bin on PATH): TERMINUS_CLIENT_PASSWORD=… terminus-client login --server ${config.publicUrl} --card ${path.join(dir, first.cert)} --key ${path.join(dir, first.key)}` +
      (config.repositoryOwners.includes(first.telematikId) ? '' : `; for management scopes start with REPOSITORY_OWNERS=${first.telematikId}`),
  );
}

/**
 * Bad configuration stops the process with one line naming the variable
 * (`terminus: PORT: ...`, exit 2); any other failure with one line, exit 1. The process exits
 * explicitly: a client library's reconnect timer must not keep a failed or stopped one alive.
 */
main(process.argv.slice(2)).then(
  (code) => exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`terminus: ${err.message}\n`);
      return exit(2);
    }
    process.stderr.write(`terminus: ${err instanceof Error ? err.message : String(err)}\n`);
    exit(1);
  },
);

function exit(code: number): void {
  process.exitCode = code;
  // Let stdout/stderr drain (pipes are asynchronous), then leave.
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}
