import fs from 'node:fs';
import path from 'node:path';

/** The package root (where package.json lives), both from src/ (ts) and dist/src/ (js). */
const PROJECT_ROOT = findRoot(__dirname);

function findRoot(start: string): string {
  let dir = start;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}

export function projectPath(...parts: string[]): string {
  return path.join(PROJECT_ROOT, ...parts);
}
