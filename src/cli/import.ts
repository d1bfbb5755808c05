import { ConfigError, type Config } from '../config';
import { composeParts } from '../app';
import { importResources, readResourceFile } from '../fhir';
import { OperationOutcomeError } from '../server-lib/outcomes';
import { createContext } from '../server';

/** `terminus import FILE...`: against DATABASE_URL or DATA_DIR; stops at the first failing file. */
export async function runImport(config: Config, files: string[]): Promise<number> {
  if (files.length === 0) {
    process.stderr.write('usage: terminus import FILE...\n');
    return 2;
  }
  const ctx = await createContext({ ...config, demoData: false }).catch((err: unknown) => {
    // A running embedded server holds DATA_DIR: the data goes in through it, not beside it.
    if (err instanceof ConfigError && err.variable === 'DATA_DIR' && /in use by process/.test(err.message)) {
      throw new ConfigError('DATA_DIR', `${err.message.replace(/^DATA_DIR: /, '')} (a running server): import through it as an owner (terminus-client http POST /fhir --data FILE, a transaction Bundle) or stop it first`);
    }
    throw err;
  });
  const { fhir } = composeParts(ctx);
  try {
    for (const [i, file] of files.entries()) {
      try {
        const started = Date.now();
        process.stdout.write(`[${i + 1}/${files.length}] ${file}: importing ...\n`);
        const n = await importResources(fhir, readResourceFile(file));
        process.stdout.write(`[${i + 1}/${files.length}] ${file}: ${n} resources imported in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
      } catch (err) {
        process.stderr.write(failure(file, err));
        return 1;
      }
    }
    return 0;
  } finally {
    await ctx.db.close();
    ctx.redis?.disconnect();
  }
}

/**
 * One line per problem, each naming the file, the entry and resource (importResources names them)
 * and the element: a file with many resources is fixed from the message alone.
 */
function failure(file: string, err: unknown): string {
  const head = `${file}: import failed, nothing from this file was stored`;
  if (!(err instanceof OperationOutcomeError)) return `${head}: ${(err as Error).message}\n`;
  const problems = err.issues.map((i) => `${file}: ${i.diagnostics ?? i.code}${i.expression?.length && !(i.diagnostics ?? '').includes(i.expression[0]) ? ` (at ${i.expression[0]})` : ''}`);
  return `${head} (${err.status}, ${problems.length} ${problems.length === 1 ? 'problem' : 'problems'}):\n${problems.join('\n')}\n`;
}
