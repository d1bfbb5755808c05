import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

/** Clock ticks per second of /proc/<pid>/stat (getconf CLK_TCK; 100 on Linux). */
const TICKS_PER_S = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) a process has used so far, 0 when it is gone. */
function cpuSecondsOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S; // utime, stime (fields 14, 15)
  } catch {
    return 0;
  }
}

/** Pids of the running processes whose command name is one of `names` (postgres, redis-server). */
export function pidsNamed(...names: string[]): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.includes(fs.readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * CPU used by groups of processes over a span: `start()` then `stop()` gives CPU seconds per group.
 * Groups are re-listed at stop (PostgreSQL starts a backend per connection).
 */
export function cpuMeter(groups: Record<string, () => number[]>): { stop(): Record<string, number> } {
  const before = new Map<number, number>();
  for (const list of Object.values(groups)) for (const pid of list()) before.set(pid, cpuSecondsOf(pid));
  return {
    stop() {
      const used: Record<string, number> = {};
      for (const [name, list] of Object.entries(groups)) {
        used[name] = list().reduce((sum, pid) => sum + cpuSecondsOf(pid) - (before.get(pid) ?? 0), 0);
      }
      return used;
    },
  };
}

export const loadAverage = () => os.loadavg().map((x) => x.toFixed(2)).join(' / ');
