/**
 * medplum's FHIRPath compares dateTime/instant values as strings, so
 * `'2027-01-01T11:00:00+01:00' <= '2027-01-01T10:30:00Z'` is false and
 * `'…10:00:00Z' <= '…10:00:00.000Z'` is false too. FHIRPath (N1 §6.1.5) compares them as points
 * in time. Invariants such as R4 per-1 and ISiK-app-1 / ISiK-slot-1 (`start <= end`) need the
 * latter, so the validator evaluates them on a copy in which every full date-time with a zone
 * offset is rewritten to UTC with millisecond precision: then string order is time order.
 * Values that are not such date-times (partial dates, invalid strings) are left untouched, so
 * format checks still see them as sent.
 */
const FULL_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export function withComparableInstants<T>(value: T): T {
  return rewrite(value) as T;
}

function rewrite(value: unknown): unknown {
  if (typeof value === 'string') return FULL_DATE_TIME.test(value) ? toUtc(value) : value;
  if (Array.isArray(value)) return value.map(rewrite);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) out[key] = rewrite(v);
    return out;
  }
  return value;
}

function toUtc(value: string): string {
  if (!isCalendarDate(value)) return value; // Date.parse rolls 02-30 over into March
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return value;
  const year = new Date(ms).getUTCFullYear();
  // toISOString() leaves the four-digit form outside these years; keep such values as sent.
  return year >= 1 && year <= 9999 ? new Date(ms).toISOString() : value;
}

function isCalendarDate(value: string): boolean {
  const [y, m, d] = value.slice(0, 10).split('-').map(Number);
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}
