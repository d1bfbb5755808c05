/**
 * Opening hours as a practice writes them (wall-clock times per weekday in its time zone) turned
 * into slot windows in UTC: the demo practice and the practice page's "new calendar" share this.
 */

/** ISO weekday: 1 = Monday ... 7 = Sunday. */
export type IsoWeekday = 1 | 2 | 3 | 4 | 5 | 6 | 7;

/** [from, to) wall-clock times ("HH:MM") per ISO weekday. */
export type OpeningHours = Partial<Record<IsoWeekday, Array<[string, string]>>>;

export interface SlotPlan {
  hours: OpeningHours;
  slotMinutes: number;
  /** First and last calendar day (YYYY-MM-DD, inclusive) in `timeZone`. */
  from: string;
  to: string;
  timeZone: string;
}

export interface SlotWindow {
  /** Calendar day and wall-clock start ("HH:MM") in the plan's time zone. */
  date: string;
  time: string;
  start: Date;
  end: Date;
}

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

export class OpeningHoursError extends Error {
  constructor(
    message: string,
    /** The field the message is about (for a form to point at). */
    readonly field: string,
  ) {
    super(message);
  }
}

/** Minutes past midnight of "HH:MM"; throws for anything else. */
export function minutesOf(hm: string, field = 'time'): number {
  const m = HHMM.exec(hm);
  if (!m) throw new OpeningHoursError(`${field}: ${JSON.stringify(hm)} is not a time HH:MM`, field);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** Every slot window of the plan, in time order; checks the plan first (ranges, overlaps, size). */
export function slotWindows(plan: SlotPlan, maxSlots = 20_000): SlotWindow[] {
  checkPlan(plan);
  const out: SlotWindow[] = [];
  for (let date = plan.from; date <= plan.to; date = addCalendarDays(date, 1)) {
    const ranges = [...(plan.hours[isoWeekday(date)] ?? [])].sort((a, b) => minutesOf(a[0]) - minutesOf(b[0]));
    for (const [from, to] of ranges) {
      for (let minute = minutesOf(from); minute + plan.slotMinutes <= minutesOf(to); minute += plan.slotMinutes) {
        const start = wallTimeToUtc(date, minute, plan.timeZone);
        const end = wallTimeToUtc(date, minute + plan.slotMinutes, plan.timeZone);
        // A wall time that does not exist (the spring DST gap) is skipped rather than invented.
        if (end.getTime() <= start.getTime()) continue;
        out.push({ date, time: hhmm(minute), start, end });
        if (out.length > maxSlots) throw new OpeningHoursError(`more than ${maxSlots} slots: choose a shorter date range or longer slots`, 'to');
      }
    }
  }
  return out;
}

function checkPlan(plan: SlotPlan): void {
  if (!Number.isInteger(plan.slotMinutes) || plan.slotMinutes < 5 || plan.slotMinutes > 480) throw new OpeningHoursError('slot length: 5 to 480 minutes', 'slotMinutes');
  for (const [field, value] of [['from', plan.from], ['to', plan.to]] as const) {
    if (!DATE.test(value) || Number.isNaN(Date.parse(`${value}T00:00:00Z`))) throw new OpeningHoursError(`${field}: ${JSON.stringify(value)} is not a date YYYY-MM-DD`, field);
  }
  if (plan.to < plan.from) throw new OpeningHoursError('the date range ends before it starts', 'to');
  if (Date.parse(`${plan.to}T00:00:00Z`) - Date.parse(`${plan.from}T00:00:00Z`) > 400 * 86_400_000) throw new OpeningHoursError('the date range is longer than 400 days', 'to');
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: plan.timeZone });
  } catch {
    throw new OpeningHoursError(`time zone ${JSON.stringify(plan.timeZone)} is unknown`, 'timeZone');
  }
  for (const [day, ranges] of Object.entries(plan.hours)) {
    if (!/^[1-7]$/.test(day)) throw new OpeningHoursError(`weekday ${day}: 1 (Monday) to 7 (Sunday)`, 'hours');
    const sorted = [...(ranges ?? [])].map(([a, b]) => [minutesOf(a, `hours.${day}`), minutesOf(b, `hours.${day}`)]).sort((x, y) => x[0] - y[0]);
    sorted.forEach(([a, b], i) => {
      if (b <= a) throw new OpeningHoursError(`weekday ${day}: ${hhmm(a)}-${hhmm(b)} ends before it starts`, `hours.${day}`);
      if (i > 0 && a < sorted[i - 1][1]) throw new OpeningHoursError(`weekday ${day}: opening hours overlap at ${hhmm(a)}`, `hours.${day}`);
    });
  }
}

export function hhmm(minute: number): string {
  return `${String(Math.floor(minute / 60)).padStart(2, '0')}:${String(minute % 60).padStart(2, '0')}`;
}

/** The calendar date (YYYY-MM-DD) in `timeZone` at instant `t`. */
export function wallDate(t: Date, timeZone: string): string {
  const p = wallClock(timeZone).formatToParts(t);
  const get = (type: string) => p.find((x) => x.type === type)?.value;
  return `${get('year')}-${get('month')}-${get('day')}`;
}

export function addCalendarDays(date: string, days: number): string {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + days)).toISOString().slice(0, 10);
}

export function isoWeekday(date: string): IsoWeekday {
  const [y, m, d] = date.split('-').map(Number);
  const day = new Date(Date.UTC(y, m - 1, d)).getUTCDay();
  return (day === 0 ? 7 : day) as IsoWeekday;
}

/** The instant at which clocks in `timeZone` show `minute` past midnight on `date`. */
export function wallTimeToUtc(date: string, minute: number, timeZone: string): Date {
  const [y, m, d] = date.split('-').map(Number);
  const asUtc = Date.UTC(y, m - 1, d, 0, minute);
  // Twice: the offset at the first guess can differ from the offset at the answer near a DST switch.
  const first = asUtc - offsetMinutes(new Date(asUtc), timeZone) * 60_000;
  return new Date(asUtc - offsetMinutes(new Date(first), timeZone) * 60_000);
}

/** Minutes the wall clock of `timeZone` is ahead of UTC at instant `t`. */
export function offsetMinutes(t: Date, timeZone: string): number {
  const parts = wallClock(timeZone).formatToParts(t);
  const get = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
  const wall = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'));
  return (wall - Math.floor(t.getTime() / 60_000) * 60_000) / 60_000;
}

/** One formatter per time zone: building an Intl.DateTimeFormat costs far more than using one. */
const clocks = new Map<string, Intl.DateTimeFormat>();

function wallClock(timeZone: string): Intl.DateTimeFormat {
  let f = clocks.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' });
    if (clocks.size < 64) clocks.set(timeZone, f);
  }
  return f;
}
