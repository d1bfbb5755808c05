import { SCHEDULE_NAME_URL } from '../common/vocabulary';

/**
 * What the CLI prints at a terminal instead of JSON: one line per resource with its reference (what
 * the next command takes, `book --slot Slot/<id>`) and the few elements a person picks by.
 */
type Json = Record<string, unknown>;

/** A searchset or other Bundle: the head line, then one line per entry. */
export function bundleSummary(bundle: Json, head: string): string {
  const entries = (Array.isArray(bundle.entry) ? bundle.entry : []) as { resource?: Json }[];
  const lines = entries.filter((e) => e?.resource).map((e) => `  ${resourceLine(e.resource!)}`);
  const next = (Array.isArray(bundle.link) ? (bundle.link as { relation?: string; url?: string }[]) : []).find((l) => l.relation === 'next');
  return [head, ...lines, ...(next?.url ? [`  more: ${next.url}`] : [])].join('\n');
}

/** One resource: its reference, then what tells it apart by type (generic: status, name, title, date). */
export function resourceLine(r: Json): string {
  const ref = r.id === undefined ? String(r.resourceType) : `${String(r.resourceType)}/${String(r.id)}`;
  const describe = DESCRIBE[String(r.resourceType)] ?? generic;
  return [ref, ...describe(r)].filter((x) => x).join('  ');
}

/** A single resource, or a Bundle (a transaction response, a search), or Parameters carrying resources. */
export function summary(value: Json): string {
  if (value.resourceType === 'Bundle') return bundleSummary(value, `Bundle ${String(value.type ?? '')} with ${Array.isArray(value.entry) ? value.entry.length : 0} entries`);
  if (value.resourceType === 'Parameters') {
    const carried = (Array.isArray(value.parameter) ? (value.parameter as { name?: string; resource?: Json }[]) : []).filter((p) => p.resource);
    if (carried.length) return carried.map((p) => `${p.name}: ${resourceLine(p.resource!)}`).join('\n');
  }
  return resourceLine(value);
}

const DESCRIBE: Record<string, (r: Json) => string[]> = {
  Slot: (r) => [span(r.start, r.end), str(r.status), reference(r.schedule), concepts(r.serviceType)],
  Appointment: (r) => [
    str(r.status),
    span(r.start, r.end),
    ...((Array.isArray(r.participant) ? r.participant : []) as { actor?: unknown }[]).map((p) => reference(p.actor)),
    concepts(r.serviceType),
  ],
  Schedule: (r) => [
    r.active === false ? 'inactive' : 'active',
    str(((Array.isArray(r.extension) ? r.extension : []) as { url?: string; valueString?: string }[]).find((e) => e.url === SCHEDULE_NAME_URL)?.valueString),
    concepts(r.serviceType),
    ...((Array.isArray(r.actor) ? r.actor : []) as unknown[]).map(reference),
  ],
  Patient: (r) => [humanName(r.name), str(r.birthDate), str(r.gender)],
  Practitioner: (r) => [humanName(r.name)],
  HealthcareService: (r) => [str(r.name), r.active === false ? 'inactive' : ''],
  OperationOutcome: (r) => ((Array.isArray(r.issue) ? r.issue : []) as { severity?: string; diagnostics?: string; details?: { text?: string } }[]).map((i) => `${i.severity ?? ''}: ${i.diagnostics ?? i.details?.text ?? ''}`),
};

function generic(r: Json): string[] {
  return [str(r.status), typeof r.name === 'string' ? r.name : humanName(r.name), str(r.title), str(r.date)];
}

function str(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
}

/** `2027-01-01 09:00-09:30Z`: the date once when both ends share it, seconds only when not :00. */
function span(start: unknown, end: unknown): string {
  if (typeof start !== 'string') return '';
  const parts = (t: string) => /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(.*)$/.exec(t);
  const a = parts(start);
  const b = typeof end === 'string' ? parts(end) : null;
  if (!a) return start;
  const time = (p: RegExpExecArray) => `${p[2]}${p[3] && !/^:00(\.0+)?$/.test(p[3]) ? p[3] : ''}`;
  if (!b) return `${a[1]} ${time(a)}${a[4]}`;
  if (a[1] === b[1] && a[4] === b[4]) return `${a[1]} ${time(a)}-${time(b)}${a[4]}`;
  return `${a[1]} ${time(a)}${a[4]} - ${b[1]} ${time(b)}${b[4]}`;
}

function reference(v: unknown): string {
  const r = v as { reference?: string; display?: string } | undefined;
  if (!r?.reference) return str(r?.display);
  return r.display ? `${r.reference} (${r.display})` : r.reference;
}

function concepts(v: unknown): string {
  const list = (Array.isArray(v) ? v : []) as { text?: string; coding?: { code?: string; display?: string }[] }[];
  return list.map((c) => c.text ?? c.coding?.[0]?.display ?? c.coding?.[0]?.code ?? '').filter((x) => x).join(', ');
}

function humanName(v: unknown): string {
  const n = (Array.isArray(v) ? v[0] : undefined) as { text?: string; given?: string[]; family?: string } | undefined;
  if (!n) return '';
  return n.text ?? [...(n.given ?? []), n.family ?? ''].join(' ').trim();
}
