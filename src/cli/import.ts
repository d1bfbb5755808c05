import type { Config } from '../config';
import { composeParts } from '../app';
import { importResources, readResourceFile } from '../fhir';
import { OperationOutcomeError } from '../shared/outcomes';
import { createContext } from '../server';

/** `terminus import FILE...`: against DATABASE_URL or DATA_DIR; stops at the first failing file. */
export async function runImport(config: Config, files: string[]): Promise<number> {
  if (files.length === 0) {
    process.stderr.write('usage: terminus import FILE...\n');
    return 2;
  }
  const ctx = await createContext({ ...config, demoData: false });
  const { fhir } = composeParts(ctx);
  try {
    for (const file of files) {
      try {
        const n = await importResources(fhir, readResourceFile(file));
        process.stdout.write(`${file}: ${n} resources imported\n`);
      } catch (err) {
        const detail = err instanceof OperationOutcomeError ? `${err.status} ${err.message}` : (err as Error).message;
        process.stderr.write(`${file}: import failed, nothing from this file was stored: ${detail}\n`);
        return 1;
      }
    }
    return 0;
  } finally {
    await ctx.db.close();
    ctx.redis?.disconnect();
  }
}
