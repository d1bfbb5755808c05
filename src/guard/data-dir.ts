import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../context';

/**
 * True when this process runs the embedded store on disk (`npm start` without DATABASE_URL):
 * generated material (dev PKI, key-encryption key) is then kept beside it in DATA_DIR. Tests and
 * PostgreSQL deployments keep it in memory or configured instead.
 */
export function dataDirInUse(ctx: AppContext): boolean {
  return !ctx.config.databaseUrl && ctx.db.kind === 'pglite' && fs.existsSync(path.join(ctx.config.dataDir, 'pgdata'));
}
