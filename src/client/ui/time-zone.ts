import fs from 'node:fs';

/** Whether Intl knows this IANA time zone name (tz database, as ICU ships it). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export interface MachineZoneSources {
  /** The process's TZ variable. */
  tz?: string;
  /** What Intl resolves for the process (undefined when ICU finds no name). */
  resolved?: string;
  /** The system's zone file (a link into a zoneinfo directory) and its name file (Debian). */
  localtime?: string;
  timezoneFile?: string;
}

/**
 * The IANA zone of the machine the page runs on, as its clock shows local time. Node's Intl takes
 * TZ only when it is a zone name: with the other forms POSIX allows (IEEE Std 1003.1, 8.3 "TZ") it
 * says UTC (a rule such as `CET-1CEST,M3.5.0,M10.5.0/3`) or no zone at all (a file such as
 * `:/etc/localtime` or `/usr/share/zoneinfo/Europe/Berlin`), while the C library and `date`
 * use the rule or the file. So TZ is read here first, then Intl, then the system's zone file.
 */
export function machineTimeZone(sources: MachineZoneSources = processZoneSources()): string {
  const tz = sources.tz?.trim().replace(/^:/, '');
  const fromTz = tz ? zoneOfTz(tz) : undefined;
  if (fromTz) return fromTz;
  if (sources.resolved && isTimeZone(sources.resolved)) return sources.resolved;
  const fromFile = (sources.localtime && zoneOfFile(sources.localtime)) || (sources.timezoneFile && zoneNamedIn(sources.timezoneFile));
  return fromFile || 'UTC';
}

function processZoneSources(): MachineZoneSources {
  return { tz: process.env.TZ, resolved: Intl.DateTimeFormat().resolvedOptions().timeZone, localtime: '/etc/localtime', timezoneFile: '/etc/timezone' };
}

function zoneOfTz(tz: string): string | undefined {
  if (tz.startsWith('/') || tz.startsWith('.')) return zoneOfFile(tz);
  if (/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(tz) && isTimeZone(tz)) return tz;
  // A POSIX rule: `std offset [dst [offset] [,rule]]`, std being 3+ letters or <...>.
  const rule = /^([A-Za-z]{3,}|<[^>]+>)([+-]?\d{1,2})(?::(\d{2}))?(.*)$/.exec(tz);
  if (!rule) return undefined;
  const [, std, hours, minutes, dst] = rule;
  // Zones named after their rule (CET, EET, WET, MET, EST5EDT, ...) are tz database zones too.
  if (/^[A-Za-z]+$/.test(std) && dst && isTimeZone(std)) return std;
  // No daylight saving time and a whole hour: the fixed zone Etc/GMT±N, whose sign is POSIX's.
  if (!dst && !minutes) {
    const n = Number(hours);
    const name = n === 0 ? 'Etc/UTC' : `Etc/GMT${n > 0 ? '+' : '-'}${Math.abs(n)}`;
    if (isTimeZone(name)) return name;
  }
  return undefined;
}

/** A zone file's name below its zoneinfo directory (`/usr/share/zoneinfo/Europe/Berlin` → `Europe/Berlin`), links followed. */
function zoneOfFile(file: string): string | undefined {
  let target: string;
  try {
    target = fs.realpathSync(file);
  } catch {
    return undefined;
  }
  const name = /\/zoneinfo\/(?:posix\/|right\/)?(.+)$/.exec(target)?.[1];
  return name && isTimeZone(name) ? name : undefined;
}

function zoneNamedIn(file: string): string | undefined {
  try {
    const name = fs.readFileSync(file, 'utf8').trim();
    return name && isTimeZone(name) ? name : undefined;
  } catch {
    return undefined;
  }
}
