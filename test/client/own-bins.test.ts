import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { linkOwnBins } from '../../src/client/link-own-bins';

/** npm ci's prepare step puts the package's own bins into node_modules/.bin (plain commands on PATH). */
let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'own-bins-'));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

const run = (file: string, args: string[]) =>
  new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(file, args, { cwd: os.tmpdir(), timeout: 60_000 }, (err, stdout) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout }));
  });

test('each bin of package.json becomes an executable sh script that runs its target with the arguments, from any folder, whatever the mode of the target', async () => {
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'x', bin: { 'x-server': 'dist/src/main.js', 'x-client': 'dist/src/client/cli.js' } }));
  fs.mkdirSync(path.join(root, 'dist', 'src', 'client'), { recursive: true });
  // A rebuild into an empty dist writes the targets without the execute bit.
  fs.writeFileSync(path.join(root, 'dist', 'src', 'main.js'), 'process.stdout.write(JSON.stringify(["server", ...process.argv.slice(2)]))', { mode: 0o644 });
  fs.writeFileSync(path.join(root, 'dist', 'src', 'client', 'cli.js'), 'process.stdout.write(JSON.stringify(["client", ...process.argv.slice(2)])); process.exitCode = 3', { mode: 0o644 });
  fs.mkdirSync(path.join(root, 'node_modules', '.bin'), { recursive: true });
  fs.writeFileSync(path.join(root, 'node_modules', '.bin', 'x-client'), 'an older file');
  const written = linkOwnBins(root);
  expect(written.map((f) => path.relative(root, f)).sort()).toEqual(['node_modules/.bin/x-client', 'node_modules/.bin/x-server']);
  for (const f of written) expect(fs.statSync(f).mode & 0o777).toBe(0o755);
  expect(await run(path.join(root, 'node_modules', '.bin', 'x-server'), ['import', 'a b.json'])).toEqual({ code: 0, stdout: '["server","import","a b.json"]' });
  expect(await run(path.join(root, 'node_modules', '.bin', 'x-client'), ['--version'])).toEqual({ code: 3, stdout: '["client","--version"]' });
});
