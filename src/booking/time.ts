/** A half-open time window [start, end) in epoch milliseconds. */
export interface Window {
  start: number;
  end: number;
}

/** Epoch ms of a FHIR instant/dateTime, undefined when absent or unparsable. */
export function epochMs(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export function overlaps(a: Window, b: Window): boolean {
  return a.start < b.end && b.start < a.end;
}

/** FHIR instant with seconds precision where possible (how the slots are written). */
export function instant(ms: number): string {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

/** PostgreSQL tstzrange literal for [start, end). */
export function tstzrange(w: Window): string {
  return `[${new Date(w.start).toISOString()},${new Date(w.end).toISOString()})`;
}

/** True when the windows, taken in order of start, cover `target` without a gap. */
export function covers(windows: Window[], target: Window): boolean {
  const sorted = [...windows].sort((a, b) => a.start - b.start);
  let reached = target.start;
  for (const w of sorted) {
    if (w.start > reached) return false;
    reached = Math.max(reached, w.end);
    if (reached >= target.end) return true;
  }
  return reached >= target.end;
}
