/**
 * FHIR date/dateTime/instant values as inclusive [low, high] millisecond ranges: a value stands
 * for every instant within its precision (`2027-01-01` is the whole day, in UTC when no offset).
 */
export interface DateRange {
  low: number;
  high: number;
}

const DATE_RE =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

export function parseDateRange(value: string): DateRange | undefined {
  const m = DATE_RE.exec(value.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, tz] = m;
  const year = Number(y);
  const month = mo ? Number(mo) - 1 : 0;
  const day = d ? Number(d) : 1;
  if (mo && (month < 0 || month > 11)) return undefined;
  // A calendar date, not a pattern match: 2025-02-30 or 24:00 names no instant (a 400 in search).
  if (d && (day < 1 || day > daysInMonth(year, month))) return undefined;
  if ((h && Number(h) > 23) || (mi && Number(mi) > 59) || (s && Number(s) > 59)) return undefined;
  const offsetMs = tz && tz !== 'Z' ? (tz[0] === '-' ? -1 : 1) * (Number(tz.slice(1, 3)) * 60 + Number(tz.slice(4, 6))) * 60000 : 0;
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const low = Date.UTC(year, month, day, h ? Number(h) : 0, mi ? Number(mi) : 0, s ? Number(s) : 0, ms) - offsetMs;
  if (Number.isNaN(low)) return undefined;
  let next: number;
  if (!mo) next = Date.UTC(year + 1, 0, 1) - offsetMs;
  else if (!d) next = Date.UTC(year, month + 1, 1) - offsetMs;
  else if (!h) next = low + 86400000;
  else if (!s) next = low + 60000;
  else if (!frac) next = low + 1000;
  else next = low + 1;
  return { low, high: next - 1 };
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(2000, month + 1, 0)).getUTCDate() - (month === 1 && !isLeapYear(year) ? 1 : 0);
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

export function periodRange(start?: string, end?: string): DateRange | undefined {
  const s = start ? parseDateRange(start) : undefined;
  const e = end ? parseDateRange(end) : undefined;
  if (!s && !e) return undefined;
  return { low: s ? s.low : -Infinity, high: e ? e.high : Infinity };
}

/** A millisecond bound as a PostgreSQL timestamptz literal (infinities included). */
export function toTimestamp(ms: number): string {
  if (ms === -Infinity) return '-infinity';
  if (ms === Infinity) return 'infinity';
  return new Date(ms).toISOString();
}
