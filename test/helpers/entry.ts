import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');

/**
 * The arguments after `node` that run a TypeScript entry point of src/ (`src/main.ts`,
 * `src/client/cli.ts`, absolute or relative to the project root) in a child process: through tsx,
 * or, with TERMINUS_TEST_BUILT=1, the build of the same checkout (`npm run build`, as the Docker
 * image runs it), which starts in a third of tsx's CPU time. CI builds first and sets it: the
 * suite spawns a few hundred such processes on each Node.
 */
export function entryArgs(entry: string): string[] {
  if (process.env.TERMINUS_TEST_BUILT !== '1') return ['--import', 'tsx', entry];
  const absolute = path.resolve(ROOT, entry);
  const relative = path.relative(ROOT, absolute);
  if (!relative.startsWith(`src${path.sep}`) || !relative.endsWith('.ts')) throw new Error(`entryArgs: ${entry} is not a TypeScript file of src/`);
  const built = path.join(ROOT, 'dist', relative.replace(/\.ts$/, '.js'));
  if (!fs.existsSync(built)) throw new Error(`TERMINUS_TEST_BUILT=1 but ${built} does not exist: run npm run build first`);
  if (fs.statSync(built).mtimeMs < fs.statSync(absolute).mtimeMs) throw new Error(`TERMINUS_TEST_BUILT=1 but ${built} is older than ${absolute}: run npm run build again`);
  return path.isAbsolute(entry) ? [built] : [path.relative(process.cwd(), built)];
}
