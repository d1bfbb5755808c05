import fs from 'node:fs';
import path from 'node:path';

/**
 * Run by `npm ci`'s prepare step after the build: puts this package's own bins (`terminus`,
 * `terminus-client`) into `node_modules/.bin` beside those of its dependencies, which is all npm
 * links there. With that folder on PATH they start as fast as `node` itself. `npx terminus-client`
 * cannot use them: npm exec installs a project that declares the bin it is asked for into its own
 * cache first (libnpmexec, "self-execution of a local bin"), 25-40 s the first time and about 1.5 s
 * of npm on every later call.
 *
 * Each bin is a small sh script, not a symlink: a symlink needs its target executable, and a
 * rebuild into an empty `dist/` writes the targets without the execute bit.
 */
export function linkOwnBins(root: string): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { bin?: Record<string, string> };
  const binDir = path.join(root, 'node_modules', '.bin');
  fs.mkdirSync(binDir, { recursive: true });
  const written: string[] = [];
  for (const [name, target] of Object.entries(manifest.bin ?? {})) {
    const file = path.join(binDir, name);
    const relative = path.relative(binDir, path.join(root, target)).split(path.sep).join('/');
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, `#!/bin/sh\n# ${name} of this clone, written by npm ci's prepare step\nexec node "$(dirname "$0")/${relative}" "$@"\n`, { mode: 0o755 });
    written.push(file);
  }
  return written;
}

if (require.main === module) {
  // POSIX shells only: on Windows npm's own .cmd shims are the way, and this clone has none to add.
  if (process.platform !== 'win32') linkOwnBins(path.join(__dirname, '..', '..', '..'));
}
