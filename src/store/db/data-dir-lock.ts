import fs from 'node:fs';
import path from 'node:path';

/** The embedded store's directory is held by another live process (serve, import, migrate). */
export class DataDirInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`${dataDir} is in use by process ${pid}`);
  }
}

/**
 * PGlite is one PostgreSQL backend writing its files without any inter-process locking: a second
 * process on the same directory (an import behind a running server's back) corrupts it. A lock
 * file created exclusively holds our pid; a lock left by a dead process is taken over. Returns
 * the release, which removes the file if it is still ours (idempotent).
 */
export function lockDataDir(dataDir: string): () => void {
  const file = path.join(dataDir, 'terminus.lock');
  for (let attempt = 0; ; attempt++) {
    try {
      fs.writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 2) throw err;
      const pid = Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) throw new DataDirInUse(dataDir, pid);
      // Stale (the holder died, or the file is torn): remove it and race for it again.
      fs.rmSync(file, { force: true });
    }
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    try {
      if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.rmSync(file, { force: true });
    } catch {
      // Already gone.
    }
  };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
