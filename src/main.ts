#!/usr/bin/env node
import { ConfigError, loadConfig, type Config } from './config';
import { createLogger } from './logger';
import { openDb } from './store/db';
import { migrate } from './store/migrate';
import { startServer } from './server';
import { runImport } from './cli/import';
import { runDevPki } from './guard/dev-pki';

const USAGE = `usage: terminus <command>
  serve               serve everything on PORT (default)
  migrate             apply database migrations and exit
  import FILE...      load FHIR Bundles or resources, keeping ids
  dev-pki DIR         write a development card PKI as PEM`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve', ...args] = argv;
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`terminus: configuration error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  switch (command) {
    case 'serve':
      return serve(config);
    case 'migrate': {
      const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      const applied = await migrate(db);
      await db.close();
      process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema up to date\n');
      return 0;
    }
    case 'import': {
      return runImport(config, args);
    }
    case 'dev-pki': {
      return runDevPki(args);
    }
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return 0;
    default:
      process.stderr.write(`terminus: unknown command "${command}"\n${USAGE}\n`);
      return 2;
  }
}

async function serve(config: Config): Promise<number> {
  const logger = createLogger(config.logLevel);
  const server = await startServer(config);
  logger.info({ url: server.url, publicUrl: config.publicUrl, store: server.ctx.db.kind }, 'terminus listening');
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down: finishing in-flight requests');
      server.close().then(resolve, resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  logger.info('stopped');
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`terminus: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
