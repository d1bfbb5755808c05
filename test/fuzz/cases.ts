/**
 * Seeded hostile requests for the FHIR layer and the guard's endpoints: the same seed
 * gives the same cases, so a finding is replayed from its seed and index. Cases start from valid
 * shapes (resources, $book parameters, FHIRPath Patch, transaction Bundles, searches) and break
 * them in the ways fuzz runs found harmful: wrong JSON types, primitive extensions that are not
 * objects, NULs, long and non-BMP strings, deep nesting, unknown operations and parameters,
 * malformed dates, headers that contradict the body; multibyte and invalid UTF-8 (raw bytes and
 * percent-encoded) in paths, query names and values, headers and bodies; values of thousands of
 * random multibyte characters (past PostgreSQL's btree row limit of 2704 bytes). Each case names
 * the credentials it is sent with: a valid session of one kind, a session with one flaw in its
 * proof or token, broken headers, or none. The first cases of every seed are the exact inputs of
 * earlier outside fuzz runs, once with each kind of caller.
 */

/** The kinds of valid session a case may be sent with (test/fuzz/sessions.ts makes them). */
export type SessionKind = 'requestor' | 'owner' | 'patient' | 'workload';
export const SESSION_KINDS: readonly SessionKind[] = ['requestor', 'owner', 'patient', 'workload'];
/** The KVNR the patient session logs in with: some fuzzed Patients carry it, so the patient sees them. */
export const PATIENT_KVNR = 'X485231029';

export interface FuzzCase {
  index: number;
  method: string;
  /** Path and query, already percent-encoded where HTTP requires it. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** One line on what the case is, for the report. */
  what: string;
  /** The credentials the runner adds (run.ts); without a session, the case's own headers (if any) are all. */
  auth: Credentials;
}

/**
 * One defect in an otherwise valid session's request (RFC 9449 §4.3 and §7.1): a proof for another
 * URL, method or token, an old or future one, one signed by another key, two proofs, a Bearer
 * scheme, no proof, the token also in the query, a token with a changed signature, a nonce that is
 * not a string, a jti longer than the guard keeps. `htu-query` and `lower-scheme` are allowed
 * variants (query in `htu` is ignored, the scheme is case-insensitive).
 */
export type Flaw = 'htu' | 'htm' | 'ath' | 'stale' | 'future' | 'other-key' | 'two-proofs' | 'bearer' | 'no-proof' | 'token-in-query' | 'tampered' | 'nonce' | 'long-jti' | 'htu-query' | 'lower-scheme';
const FLAWS: readonly Flaw[] = ['htu', 'htm', 'ath', 'stale', 'future', 'other-key', 'two-proofs', 'bearer', 'no-proof', 'token-in-query', 'tampered', 'nonce', 'long-jti', 'htu-query', 'lower-scheme'];

export interface Credentials {
  session?: SessionKind;
  flaw?: Flaw;
}

/** How a case's credentials are named in reports: `owner`, `patient+htu`, `none`, `broken`. */
export function credentialName(c: FuzzCase): string {
  if (c.auth.session) return c.auth.flaw ? `${c.auth.session}+${c.auth.flaw}` : c.auth.session;
  return c.headers.authorization !== undefined || c.headers.dpop !== undefined ? 'broken' : 'none';
}

/** mulberry32: small, fast, and the same everywhere. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Dice {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** One code point of a random UTF-8 length (2, 3 or 4 bytes), never a surrogate. */
function multibyteChar(d: Dice): string {
  switch (d.int(3)) {
    case 0:
      return String.fromCodePoint(0x80 + d.int(0x780));
    case 1: {
      const cp = 0x800 + d.int(0xf800 - 0x800);
      return String.fromCodePoint(cp >= 0xd800 && cp < 0xe000 ? cp + 0x800 : cp);
    }
    default:
      return String.fromCodePoint(0x10000 + d.int(0x100000));
  }
}

/** `n` random multibyte characters. */
function multibyte(d: Dice, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += multibyteChar(d);
  return s;
}

/** `n` random UTF-16 code units: controls, NULs, lone surrogates, anything. */
function anyChars(d: Dice, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(d.chance(0.2) ? d.int(0x80) : d.int(0x10000));
  return s;
}

/** `n` random characters a FHIR string may hold (no controls, surrogates or noncharacters U+FFFE/U+FFFF), any plane. */
function printable(d: Dice, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) {
    const cp = d.chance(0.3) ? 0x20 + d.int(0x5f) : d.chance(0.8) ? 0xa0 + d.int(0xd800 - 0xa0) : 0xe000 + d.int(0x10000 - 0xe000 - 2);
    s += String.fromCodePoint(d.chance(0.1) ? 0x10000 + d.int(0x100000 - 2) : cp);
  }
  return s;
}

/**
 * A value of a few thousand characters, in UTF-8 up to four bytes each (PostgreSQL's btree row
 * limit is 2704 bytes): mostly characters FHIR strings may hold, so the value is stored and
 * indexed; now and then any UTF-16 code units, which validation must refuse.
 */
function longText(d: Dice): string {
  const n = d.pick([700, 1000, 1400, 2000, 3000, 4000]);
  switch (d.int(6)) {
    case 0:
    case 1:
      return multibyte(d, n);
    case 2:
      return printable(d, n);
    case 3:
      return d.pick(['é', '€', '\u{1F600}', 'x', 'ß ']).repeat(n);
    case 4:
      return `${d.pick(['http://fhir.de/sid/gkv/kvid-10|', '', 'A', ' '])}${multibyte(d, n >> 1)}${printable(d, n >> 1)}`;
    default:
      return anyChars(d, n);
  }
}

/** A string that does not belong: the classic list, short multibyte or random text, or a long value. */
function hostileText(d: Dice): string {
  switch (d.int(6)) {
    case 0:
      return multibyte(d, 1 + d.int(12));
    case 1:
      return anyChars(d, 1 + d.int(12));
    case 2:
      return longText(d);
    default:
      return d.pick(STRINGS);
  }
}

/** Byte sequences that are not UTF-8 (Unicode 15 §3.9 D92: overlong, surrogates, past U+10FFFF, truncated, stray continuation), and a few that are. */
const BAD_UTF8: readonly number[][] = [
  [0xff],
  [0xfe],
  [0xff, 0xfe],
  [0xc0, 0xaf],
  [0xc0, 0x80],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80],
  [0xbf],
  [0xc3],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0xe2, 0x82, 0x28],
  [0xc3, 0x28],
  [0xa0, 0xa1],
  [0xf0, 0x28, 0x8c, 0xbc],
  [0xef, 0xbb, 0xbf],
  [0xc3, 0xa9],
  [0xf0, 0x9f, 0x98, 0x80],
];

/** Random bytes from 0x80 up: never UTF-8 as a whole. */
function highBytes(d: Dice, n: number): number[] {
  return Array.from({ length: n }, () => 0x80 + d.int(0x80));
}

/** A byte sequence for a raw (unencoded) place: one of BAD_UTF8, random high bytes, or the UTF-8 of random multibyte text. */
function rawBytes(d: Dice): number[] {
  switch (d.int(3)) {
    case 0:
      return d.pick(BAD_UTF8);
    case 1:
      return highBytes(d, 1 + d.int(8));
    default:
      return [...Buffer.from(multibyte(d, 1 + d.int(6)), 'utf8')];
  }
}

const pct = (bytes: readonly number[], lower = false) => bytes.map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')[lower ? 'toLowerCase' : 'toUpperCase']();
/** Bytes as the characters Node's HTTP client writes as those very bytes (it writes the request head as latin1). */
const latin1 = (bytes: readonly number[]) => Buffer.from(bytes).toString('latin1');

/**
 * A path segment, query name or value as it goes on the wire: percent-encoded text (UTF-8, lone
 * surrogates as %ED%A0%80), percent-encoded invalid UTF-8, raw bytes (invalid or valid UTF-8,
 * unencoded), broken escapes, characters URLs reserve, or a mix.
 */
function wireText(d: Dice): string {
  switch (d.int(8)) {
    case 0:
      return enc(hostileText(d));
    case 1:
      return pct(rawBytes(d), d.chance(0.5));
    case 2:
      return latin1(rawBytes(d).filter((b) => b > 0x20));
    case 3:
      return d.pick(['%', '%Z', '%zz', '%%', '%2', '%00', '%u0041', '%C0%AF', '..', '.', '%2e%2e', '%2F', '/', '\\', ';', '=', '&', "'", '"', '<>', '{}', '|', '^', '`', '[]', ':', '$', '!', '*', ',', '+', '@']);
    case 4:
      return enc(longText(d).slice(0, d.pick([100, 300, 1200])));
    default: {
      let s = '';
      for (let i = 0, n = 2 + d.int(4); i < n; i++) s += d.pick([() => d.pick(['a', 'x', 'Patient', '-', '1', '_', '.']), () => pct(d.pick(BAD_UTF8)), () => latin1(rawBytes(d).filter((b) => b > 0x20)), () => enc(multibyte(d, 1 + d.int(3)))])();
      return s;
    }
  }
}

/** A header value Node's client sends (tab, 0x20-0x7E, 0x80-0xFF) made of raw UTF-8, invalid UTF-8 or many bytes. */
function wireHeader(d: Dice): string {
  switch (d.int(5)) {
    case 0:
      return latin1([...Buffer.from(multibyte(d, 1 + d.int(40)), 'utf8')]);
    case 1:
      return latin1(highBytes(d, 1 + d.int(40)));
    case 2:
      return `${d.pick(['application/fhir+json', 'W/"1"', 'text/plain', 'Bearer', '*/*'])}${latin1(d.pick(BAD_UTF8))}`;
    case 3:
      return latin1([...Buffer.from(longText(d), 'utf8')].map((b) => (b < 0x20 || b === 0x7f ? 0x41 : b))).slice(0, d.pick([1000, 4000, 12000]));
    default:
      return d.pick(['', ' ', '\t', ';', ',', '=', '"', 'a'.repeat(9000), 'application/fhir+json; charset=utf-16', 'application/fhir+json; charset="', 'application/fhir+json;;;', 'W/', 'W/"', '*, *', '\u00ff\u00fe']);
  }
}

/** Headers the server reads (content negotiation, conditional requests, tracing, proxies, PoPP) and the identity headers only the guard may set. */
const HOSTILE_HEADER_NAMES = ['content-type', 'accept', 'prefer', 'if-match', 'if-none-match', 'if-none-exist', 'if-modified-since', 'x-request-id', 'traceparent', 'tracestate', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'popp', 'accept-charset', 'accept-language', 'accept-encoding', 'content-encoding', 'origin', 'x-http-method-override', 'svc-user-info', 'svc-client-data', 'svc-popp-token-content', 'x-fuzz'];

const TYPES = ['Patient', 'Appointment', 'Slot', 'Schedule', 'Subscription', 'CodeSystem', 'ValueSet', 'Practitioner', 'HealthcareService', 'Location', 'Bundle', 'Parameters', 'Binary', 'Foo', 'patient', ''];
const IDS = ['p1', 'demo-schedule-weber', 'demo-schedule-schneider', 'x', 'a'.repeat(64), 'a'.repeat(65), '..', '%2e%2e', '%00', '%ZZ', '%E0%A4%A', 'Patient', '$book', '_history', '-', 'ü', '%F0%9F%98%80', '1'.repeat(30)];
const OPERATIONS = ['$book', '$status', '$events', '$validate', '$everything', '$meta', '$foo', '$', '$book$book', '$expand', '$lookup', '$get-ws-binding-token'];

const SEARCH_PARAMS: Record<string, string[]> = {
  Patient: ['_id', 'identifier', 'name', 'family', 'given', 'birthdate', 'gender', 'address', 'telecom', '_lastUpdated', 'active'],
  Appointment: ['_id', 'status', 'date', 'patient', 'actor', 'slot', 'identifier', 'service-type', 'specialty', 'practitioner', '_lastUpdated', '_tag'],
  Slot: ['_id', 'schedule', 'status', 'start', 'service-type', 'specialty', 'schedule.actor', 'schedule.active', '_lastUpdated'],
  Schedule: ['_id', 'actor', 'active', 'service-type', 'specialty', 'date', 'identifier'],
  Subscription: ['_id', 'status', 'url', 'criteria', 'type'],
  CodeSystem: ['_id', 'url', 'name', 'status', 'version'],
};
const RESULT_PARAMS = ['_count', '_offset', '_sort', '_include', '_revinclude', '_summary', '_elements', '_format', '_pretty', '_total', '_since', '_at', '_has', '_contained', '_filter', ''];
const MODIFIERS = ['', ':exact', ':contains', ':missing', ':not', ':text', ':above', ':below', ':identifier', ':Patient', ':of-type', ':in', ':foo', ':'];
const PREFIXES = ['', 'eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap', 'xx'];
const STRINGS = [
  '',
  ' ',
  'a',
  '\u0000',
  'a\u0000b',
  'x'.repeat(3000),
  'é'.repeat(1500),
  '\uD83D\uDE00'.repeat(500),
  '\uD800',
  '<script>alert(1)</script>',
  '../../etc/passwd',
  "'; DROP TABLE resource; --",
  '%',
  '%00',
  '%ZZ',
  '\\',
  '"',
  'null',
  '2026-13-45',
  '2026-02-30',
  '2025-02-29',
  '2026-01-01T24:00:00Z',
  '2026-01-01T10:00:00+99:00',
  '2026-01-01T10:00:00.1234567890Z',
  '9999-12-31T23:59:59Z',
  '0000-01-01',
  '-1',
  '1e400',
  '9223372036854775808',
  'http://example.org/x|y',
  '|',
  '||',
  'a,b,,c',
  'Patient/p1',
  'Patient/',
  'urn:uuid:3fdc72f1-9e1b-4e1d-9a3f-1c2d3e4f5a6b',
  'Slot/%00',
  'http://terminology.hl7.org/CodeSystem/v2-0203|KVZ10',
  'true',
  'free',
  'booked',
  '\u202e',
  '\r\n',
];
const SEARCH_VALUES = [...STRINGS, 'gt2026-01-01', 'le2020', 'eq2026-01-01T10:00:00Z', 'sa', 'ap2026', 'http://fhir.de/sid/gkv/kvid-10|A123456789', 'Schedule/demo-schedule-weber', 'demo-schedule-weber'];

/** JSON values that do not belong where they land. */
function hostileValue(d: Dice, depth = 0): unknown {
  switch (d.int(14)) {
    case 0:
      return null;
    case 1:
      return d.pick([true, false]);
    case 2:
      return d.pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, 0.1]);
    case 3:
      return d.pick(STRINGS);
    case 4:
      return hostileText(d);
    case 5:
      return d.chance(0.5) ? rawInString(d) : `${d.pick(['Patient/', 'A', 'http://x.test/', ''])}${rawInString(d)}`;
    case 6:
      return {};
    case 7:
      return [];
    case 8:
      return [null];
    case 9:
      return depth < 3 ? [hostileValue(d, depth + 1), hostileValue(d, depth + 1)] : [];
    case 10:
      return depth < 3 ? { [d.pick(['url', 'value', 'reference', 'system', 'code', 'extension', 'id', 'x', '__proto__', 'resourceType'])]: hostileValue(d, depth + 1) } : {};
    case 11:
      return nest(d.int(120) + 1);
    case 12:
      return { resourceType: d.pick(TYPES) };
    default:
      return d.pick(['Patient/p1', 'Slot/x', '#', 'cancelled', 'proposed', 'booked', '2026-01-01T10:00:00Z']);
  }
}

/**
 * A marker inside a JSON string that `jsonBody` replaces by raw bytes after serializing: invalid
 * UTF-8 inside a string literal, where a reader that decodes leniently would let it through.
 */
function rawInString(d: Dice): string {
  return `~~raw:${rawBytes(d).map((b) => b.toString(16)).join(',')}~~`;
}

/** The text as UTF-8 with each rawInString marker replaced by its bytes. */
function bytesOf(text: string): Buffer {
  const parts = text.split(/~~raw:([0-9a-f,]+)~~/);
  return Buffer.concat(parts.map((part, i) => (i % 2 ? Buffer.from(part.split(',').map((h) => parseInt(h, 16))) : Buffer.from(part, 'utf8'))));
}

function jsonBody(doc: unknown): Buffer {
  return bytesOf(JSON.stringify(doc) ?? 'null');
}

function nest(depth: number): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = { extension: [{ url: 'http://x.test', extension: [v] }] };
  return v;
}

const iso = (offsetDays: number, hour: number) => new Date(Date.UTC(2027, 0, 4 + offsetDays, hour)).toISOString();

function patient(d: Dice): Record<string, unknown> {
  return {
    resourceType: 'Patient',
    identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: d.chance(0.2) ? PATIENT_KVNR : `A${String(d.int(1e9)).padStart(9, '0')}`, type: { coding: [{ system: 'http://fhir.de/CodeSystem/identifier-type-de-basis', code: 'KVZ10' }] } }],
    name: [{ use: 'official', family: 'Fuzz', given: ['Erika'] }],
    gender: 'female',
    birthDate: '1970-01-01',
    active: true,
  };
}

/**
 * A valid Patient but for one to three values of thousands of random (multibyte) characters: the
 * identifier's value or system, a name, an address or a telecom value, each indexed for search.
 */
function longPatient(d: Dice): Record<string, unknown> {
  const p = patient(d) as { identifier: Record<string, unknown>[]; name: Record<string, unknown>[] } & Record<string, unknown>;
  for (let i = 0, n = 1 + d.int(3); i < n; i++) {
    const v = longText(d);
    switch (d.int(7)) {
      case 0:
      case 1:
        p.identifier[0].value = v;
        break;
      case 2:
        p.identifier.push({ system: d.chance(0.5) ? `urn:fuzz:${v}` : 'urn:fuzz', value: v });
        break;
      case 3:
        p.name[0].family = v;
        break;
      case 4:
        p.name[0].given = [v, 'Erika'];
        break;
      case 5:
        p.address = [{ line: [v], city: v, postalCode: '12345', country: 'DE' }];
        break;
      default:
        p.telecom = [{ system: 'email', value: v }];
    }
  }
  return p;
}

function slot(d: Dice): Record<string, unknown> {
  const day = d.int(30);
  return {
    resourceType: 'Slot',
    schedule: { reference: 'Schedule/demo-schedule-weber' },
    status: d.pick(['free', 'busy', 'busy-unavailable', 'entered-in-error']),
    start: iso(day, 8),
    end: iso(day, 9),
  };
}

function schedule(): Record<string, unknown> {
  return {
    resourceType: 'Schedule',
    active: true,
    serviceType: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '124' }] }],
    specialty: [{ coding: [{ system: 'urn:oid:1.2.276.0.76.5.114', code: '010' }] }],
    actor: [{ reference: 'Practitioner/demo-practitioner-weber' }],
    planningHorizon: { start: iso(0, 0), end: iso(60, 0) },
  };
}

function appointment(d: Dice): Record<string, unknown> {
  const day = d.int(30);
  return {
    resourceType: 'Appointment',
    status: d.pick(['proposed', 'booked', 'pending', 'cancelled']),
    start: iso(day, 10),
    end: iso(day, 11),
    slot: [{ reference: 'Slot/x' }],
    participant: [{ actor: { reference: 'Patient/p1' }, status: 'accepted' }],
  };
}

function subscriptionResource(): Record<string, unknown> {
  return {
    resourceType: 'Subscription',
    meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKSubscriptionTermin'] },
    status: 'requested',
    reason: 'fuzz',
    criteria: 'https://gematik.de/fhir/isik/SubscriptionTopic/appointment-update',
    channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook', payload: 'application/fhir+json', header: ['Authorization: Bearer x'] },
  };
}

function bookParameters(d: Dice): Record<string, unknown> {
  return {
    resourceType: 'Parameters',
    parameter: [
      { name: 'appt-resource', resource: appointment(d) },
      ...(d.chance(0.3) ? [{ name: 'cancelled-appt-id', valueUri: 'Appointment/x' }] : []),
    ],
  };
}

function fhirPathPatch(d: Dice): Record<string, unknown> {
  const type = d.pick(['replace', 'add', 'insert', 'delete', 'move', 'foo']);
  return {
    resourceType: 'Parameters',
    parameter: [
      {
        name: 'operation',
        part: [
          { name: 'type', valueCode: type },
          { name: 'path', valueString: d.pick(['Appointment.status', 'Patient.name', 'Patient', 'Appointment.participant[0]', 'Patient.name.where(use=\'official\')', '%resource', 'Patient.constructor', '', '(((', 'Appointment.slot']) },
          { name: 'name', valueString: d.pick(['active', 'cancelationReason', 'x', '__proto__']) },
          { name: 'value', ...d.pick([{ valueCode: 'cancelled' }, { valueBoolean: true }, { valueString: 'x' }, { valueHumanName: { family: 'X' } }, {}]) },
          ...(d.chance(0.3) ? [{ name: 'index', valueInteger: d.pick([0, 1, -1, 99, 2 ** 31]) }] : []),
        ],
      },
    ],
  };
}

function bundle(d: Dice): Record<string, unknown> {
  const n = 1 + d.int(4);
  const entry = Array.from({ length: n }, () => {
    const r = d.pick([patient, slot, schedule, appointment])(d);
    const method = d.pick(['POST', 'PUT', 'GET', 'DELETE', 'PATCH']);
    return {
      fullUrl: d.pick([`urn:uuid:00000000-0000-4000-8000-${String(d.int(1e12)).padStart(12, '0')}`, 'urn:uuid:x', 'http://other.test/Patient/1', undefined]),
      resource: method === 'GET' || method === 'DELETE' ? undefined : r,
      request: { method, url: d.chance(0.2) ? d.pick([`${String(r.resourceType)}/${wireText(d)}`, `${String(r.resourceType)}${searchQuery(d, String(r.resourceType)) || '?=x'}`, wireText(d)]) : method === 'POST' ? String(r.resourceType) : `${String(r.resourceType)}/${d.pick(IDS)}` },
    };
  });
  return { resourceType: 'Bundle', type: d.pick(['transaction', 'batch', 'collection', 'searchset', 'x']), entry };
}

/** Every path into a JSON value: [parent, key] pairs. */
function slotsOf(v: unknown, out: [Record<string, unknown> | unknown[], string | number][] = []): [Record<string, unknown> | unknown[], string | number][] {
  if (Array.isArray(v)) v.forEach((x, i) => (out.push([v, i]), slotsOf(x, out)));
  else if (v && typeof v === 'object') for (const k of Object.keys(v)) out.push([v as Record<string, unknown>, k]), slotsOf((v as Record<string, unknown>)[k], out);
  return out;
}

/** A few changes to a valid shape: a node replaced, removed, its primitive extension broken, a key added. */
function mutate(d: Dice, doc: Record<string, unknown>): Record<string, unknown> {
  const changes = d.int(4);
  for (let i = 0; i < changes; i++) {
    const slots = slotsOf(doc);
    if (!slots.length) break;
    const [parent, key] = d.pick(slots);
    switch (d.int(6)) {
      case 0:
      case 1:
        (parent as Record<string | number, unknown>)[key] = hostileValue(d);
        break;
      case 2:
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key as string];
        break;
      case 3:
        if (!Array.isArray(parent)) parent[`_${String(key)}`] = hostileValue(d);
        break;
      case 4:
        if (!Array.isArray(parent)) parent[d.pick(['foo', 'extension', 'modifierExtension', 'contained', 'meta', 'text', 'id', 'resourceType', 'fhir_comments'])] = hostileValue(d);
        break;
      default: {
        const v = (parent as Record<string | number, unknown>)[key];
        (parent as Record<string | number, unknown>)[key] = Array.isArray(v) ? v[0] : [v, v];
      }
    }
  }
  return doc;
}

/** Percent-encoding that also writes a lone surrogate, as the invalid UTF-8 bytes %ED%A0%80. */
function enc(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, (c) => (c.charCodeAt(0) < 0xdc00 ? '\u0001' : '\u0002')).split(/(\u0001|\u0002)/).map((part) => (part === '\u0001' ? '%ED%A0%80' : part === '\u0002' ? '%ED%B0%80' : encodeURIComponent(part))).join('');
}

/** Chained and reverse-chained parameters per type (FHIR R4 search §3.1.1.4.13-14). */
const CHAINS: Record<string, string[]> = {
  Appointment: ['patient.identifier', 'patient.name', 'slot.schedule', 'slot.schedule.actor', 'actor:Patient.name', 'actor:Practitioner.identifier', 'practitioner.name', 'slot.start', '_has:Slot:schedule:status'],
  Slot: ['schedule.actor', 'schedule.active', 'schedule.identifier', 'schedule.actor:Practitioner.name', '_has:Appointment:slot:status'],
  Schedule: ['actor:Practitioner.name', 'actor.identifier', '_has:Slot:schedule:status'],
  Patient: ['_has:Appointment:patient:status', 'general-practitioner.name', 'organization.name'],
};

/** A name that breaks: a NUL or a hostile piece inside a chained name, an empty link, a wire text. */
function brokenName(d: Dice, type: string): string {
  const chain = d.pick(CHAINS[type] ?? CHAINS.Appointment);
  const at = d.int(chain.length + 1);
  switch (d.int(4)) {
    case 0:
      return `${enc(chain.slice(0, at))}%00${enc(chain.slice(at))}`;
    case 1:
      return `${enc(chain.slice(0, at))}${wireText(d)}${enc(chain.slice(at))}`;
    case 2:
      return enc(d.pick([`${chain}.`, `.${chain}`, chain.replace('.', '..'), `${chain}:`, `${chain}.${chain}`, `${chain}\u0000`, `_has::::`, '_has:', '_type:not-in', '_type']));
    default:
      return wireText(d);
  }
}

function searchQuery(d: Dice, type: string): string {
  const params = SEARCH_PARAMS[type] ?? ['_id', 'foo'];
  const n = d.int(5);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = d.next();
    if (r < 0.25) {
      const name = d.pick(RESULT_PARAMS);
      const value = d.pick([String(d.int(5000) - 10), 'x', '', 'json', 'xml', 'application/fhir+xml', 'true', 'count', 'Slot:schedule', 'Appointment:patient', '*', 'status,-start', '-_lastUpdated', 'id,status', ...STRINGS.slice(0, 12)]);
      parts.push(`${enc(name)}=${enc(value)}`);
    } else if (r < 0.65) {
      const name = `${d.chance(0.8) ? d.pick(params) : d.pick(CHAINS[type] ?? params)}${d.pick(MODIFIERS)}`;
      const value = `${d.pick(PREFIXES)}${d.pick(SEARCH_VALUES)}`;
      parts.push(`${enc(name)}=${d.chance(0.1) ? value.replace(/[^A-Za-z0-9]/g, '') : enc(value)}`);
    } else if (r < 0.8) {
      parts.push(`${enc(`${d.pick(params)}${d.pick(MODIFIERS)}`)}=${d.chance(0.2) ? d.pick(PREFIXES) : ''}${wireText(d)}`);
    } else if (r < 0.92) {
      parts.push(`${brokenName(d, type)}=${d.chance(0.5) ? enc(d.pick(SEARCH_VALUES)) : wireText(d)}`);
    } else {
      // Parameters without a name or without a value, empty pairs, other separators.
      parts.push(d.pick(['=', '=x', `=${wireText(d)}`, '==', '&&', ';;', '&;', enc(d.pick(params)), `${enc(d.pick(params))}==`, '_type:not-in=', '_type=', `_type=${wireText(d)}`, `${wireText(d)}`]));
    }
  }
  if (d.chance(0.05)) parts.push('=', '&&', '%ZZ=1', 'a=%E0%A4%A');
  const query = parts.join(d.chance(0.05) ? d.pick(['&&', ';', '&;', '&=&']) : '&');
  return parts.length ? `?${query}${d.chance(0.03) ? d.pick(['#', '#x', '&#', '#%ff']) : ''}` : '';
}

const CONTENT_TYPES = ['application/fhir+json', 'application/fhir+json; charset=utf-8', 'application/json', 'application/fhir+xml', 'application/json-patch+json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/fhir+json; charset=latin1', ''];
const ACCEPTS = ['application/fhir+json', 'application/fhir+xml', 'application/json', 'text/html', '*/*', 'application/xml', 'foo/bar', ''];

/** A FHIR resource in XML (FHIR R4 §2.6.2) with hostile values, character references, entities, encodings and broken markup. */
function xmlBody(d: Dice): string {
  const x = (v: string) => v.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  const v = () => d.pick([() => x(hostileText(d)), () => rawInString(d), () => d.pick(['&#0;', '&#xD800;', '&#x110000;', '&#65;', '&#x1F600;', '&amp;', '&lt;', '&bogus;', '&#;', '&#x;', '&', '<', ']]>', '\u0000', '\uFFFE']), () => x(longText(d))])();
  const patientXml = () => `<Patient xmlns="http://hl7.org/fhir"><identifier><system value="http://fhir.de/sid/gkv/kvid-10"/><value value="${v()}"/></identifier><name><family value="${v()}"/><given value="${v()}"/></name><gender value="${d.pick(['female', v()])}"/></Patient>`;
  switch (d.int(6)) {
    case 0:
      return patientXml();
    case 1:
      return `<?xml version="${d.pick(['1.0', '1.1', '2.0', v()])}" encoding="${d.pick(['UTF-8', 'ISO-8859-1', 'UTF-16', 'x', v()])}"?>${patientXml()}`;
    case 2:
      return `<!DOCTYPE Patient [<!ENTITY a "${'a'.repeat(50)}"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY e SYSTEM "file:///etc/passwd">]><Patient xmlns="http://hl7.org/fhir"><name><family value="${d.pick(['&c;', '&e;', '&a;'])}"/></name></Patient>`;
    case 3:
      return `<Appointment xmlns="http://hl7.org/fhir"><status value="${d.pick(['proposed', v()])}"/><start value="${v()}"/><comment value="${v()}"/><participant><actor><reference value="${v()}"/></actor><status value="accepted"/></participant></Appointment>`;
    case 4:
      return patientXml().slice(0, d.int(180));
    default:
      return `<${d.pick(['Patient', 'Bundle', 'Parameters', 'x:Patient', v()])} xmlns="${d.pick(['http://hl7.org/fhir', '', v()])}"><![CDATA[${v()}]]><!-- ${v()} --><${d.pick(['id', 'meta', 'text', 'extension'])} value="${v()}"/>${'<extension url="x">'.repeat(d.int(60))}</${d.pick(['Patient', 'Bundle', 'x'])}>`;
  }
}

/** The FHIR layer: reads, searches, writes, operations, transactions, patches; hostile paths, long values, XML, form searches, conditional requests. */
function fhirCase(d: Dice): Omit<FuzzCase, 'index' | 'auth'> {
  const type = d.pick(TYPES.slice(0, 6).concat(d.chance(0.1) ? TYPES : []));
  const headers: Record<string, string> = {};
  if (d.chance(0.5)) headers.accept = d.chance(0.7) ? 'application/fhir+json' : d.pick(ACCEPTS);
  let method = 'GET';
  let path: string;
  let doc: unknown;
  let text: string | undefined;
  let form: Buffer | undefined;
  let what: string;
  switch (d.int(17)) {
    case 0:
    case 1:
      path = `/fhir/${type}${searchQuery(d, type)}`;
      what = `search ${type}`;
      break;
    case 2:
      method = d.pick(['GET', 'GET', 'HEAD', 'DELETE']);
      path = `/fhir/${type}/${d.pick(IDS)}${d.pick(['', '/_history', `/_history/${d.pick(['1', '0', '-1', '2147483648', 'x'])}`, '/$meta', '/x/y'])}${d.chance(0.3) ? searchQuery(d, type) : ''}`;
      what = `${method} by id`;
      break;
    case 3:
      method = 'POST';
      path = '/fhir/Appointment/$book';
      doc = mutate(d, bookParameters(d));
      what = '$book';
      break;
    case 4:
      method = 'PATCH';
      path = `/fhir/${d.pick(['Appointment', 'Patient'])}/${d.pick(['p1', 'x', 'demo-schedule-weber'])}`;
      doc = d.chance(0.8) ? mutate(d, fhirPathPatch(d)) : hostileValue(d);
      if (d.chance(0.3)) headers['if-match'] = d.pick(['W/"1"', '"1"', 'W/"x"', '*', '', 'W/"99999999999"']);
      what = 'PATCH';
      break;
    case 5:
      method = 'POST';
      path = '/fhir';
      doc = mutate(d, bundle(d));
      what = 'Bundle';
      break;
    case 6:
      method = d.pick(['POST', 'GET', 'PUT']);
      path = `/fhir/${type}/${d.chance(0.5) ? '' : `${d.pick(IDS)}/`}${d.pick(OPERATIONS)}${d.chance(0.3) ? searchQuery(d, type) : ''}`;
      if (method !== 'GET') doc = mutate(d, { resourceType: 'Parameters', parameter: [{ name: d.pick(['id', 'status', 'appt-resource', 'x']), valueString: 'x' }] });
      what = `operation ${method}`;
      break;
    case 7: {
      // Multibyte, invalid UTF-8 and broken escapes in the path's segments.
      method = d.pick(['GET', 'GET', 'HEAD', 'DELETE', 'PUT', 'PATCH', 'POST']);
      const segments = d.pick([
        () => `${type}/${wireText(d)}`,
        () => wireText(d),
        () => `${type}/${wireText(d)}/_history/${wireText(d)}`,
        () => `${type}/${d.pick(IDS)}/${wireText(d)}`,
        () => `${type}/${wireText(d)}/$${wireText(d)}`,
        () => `${wireText(d)}/${wireText(d)}`,
        () => `${type}/${wireText(d)}/`,
        () => `${type}/_search/${wireText(d)}`,
      ])();
      path = `/fhir/${segments}${d.chance(0.3) ? searchQuery(d, type) : ''}`;
      if (method === 'PATCH') doc = mutate(d, fhirPathPatch(d));
      else if (method === 'PUT' || method === 'POST') doc = mutate(d, d.pick([patient, appointment, slot] as ((d: Dice) => Record<string, unknown>)[])(d));
      what = `${method} hostile path`;
      break;
    }
    case 8:
    case 9: {
      // Values of thousands of multibyte characters: index rows past PostgreSQL's btree limit.
      method = d.pick(['POST', 'POST', 'PUT']);
      const long = d.chance(0.75) ? longPatient(d) : { ...d.pick([appointment, slot] as ((d: Dice) => Record<string, unknown>)[])(d), comment: longText(d) };
      const rt = String(long.resourceType);
      const id = d.pick(['p1', 'x', `long-${d.int(50)}`]);
      path = `/fhir/${rt}${method === 'PUT' ? `/${id}` : ''}`;
      if (method === 'PUT') long.id = id;
      doc = d.chance(0.2) ? mutate(d, long) : long;
      what = `${method} ${rt} with long values`;
      break;
    }
    case 10: {
      // The search side of long values: a search by one.
      const t = d.pick(['Patient', 'Appointment', 'Schedule', 'Slot']);
      const name = d.pick(['identifier', 'name', 'family', 'given', 'address', 'telecom', 'identifier:below', 'identifier:of-type', 'name:contains', 'name:exact', '_id', 'patient.identifier', 'actor:Patient.name', '_has:Appointment:patient:identifier', 'schedule.identifier']);
      path = `/fhir/${t}?${enc(name)}=${enc(longText(d).slice(0, d.pick([300, 700, 1000, 1500])))}`;
      what = `search ${t} by a long value`;
      break;
    }
    case 11:
      method = d.pick(['POST', 'PUT']);
      path = d.chance(0.5) ? '/fhir/Patient' : `/fhir/${d.pick(['Patient', 'Appointment'])}${method === 'PUT' ? '/x' : ''}`;
      text = xmlBody(d);
      headers['content-type'] = d.pick(['application/fhir+xml', 'application/fhir+xml', 'application/xml', 'text/xml', 'application/fhir+xml; charset=iso-8859-1']);
      what = `${method} XML`;
      break;
    case 12:
      // POST [type]/_search: the form's parameters count as the query's (FHIR R4 §3.1.1.3).
      method = 'POST';
      path = `/fhir/${type}/_search${d.chance(0.3) ? searchQuery(d, type) : ''}`;
      form = Buffer.from(searchQuery(d, type).slice(1), 'latin1'); // raw bytes as generated
      headers['content-type'] = d.chance(0.8) ? 'application/x-www-form-urlencoded' : d.pick(CONTENT_TYPES);
      what = `form search ${type}`;
      break;
    case 13: {
      // Conditional interactions (FHIR R4 §3.1.0.8-10): the condition is a search.
      method = d.pick(['POST', 'PUT', 'DELETE', 'PATCH']);
      const t = d.pick(['Patient', 'Appointment', 'Slot']);
      if (method === 'POST') {
        path = `/fhir/${t}`;
        headers['if-none-exist'] = d.chance(0.5) ? searchQuery(d, t).slice(1) : `identifier=${d.chance(0.5) ? wireText(d) : wireHeader(d)}`;
      } else path = `/fhir/${t}${searchQuery(d, t) || `?identifier=${wireText(d)}`}`;
      if (method === 'PATCH') doc = mutate(d, fhirPathPatch(d));
      else if (method !== 'DELETE') doc = mutate(d, d.pick([patient, appointment, slot] as ((d: Dice) => Record<string, unknown>)[])(d));
      what = `conditional ${method} ${t}`;
      break;
    }
    default: {
      method = d.pick(['POST', 'PUT', 'PUT']);
      const make = d.pick([patient, slot, schedule, appointment, subscriptionResource] as ((d: Dice) => Record<string, unknown>)[]);
      const made = mutate(d, make(d));
      doc = made;
      const rt = typeof made.resourceType === 'string' && d.chance(0.8) ? made.resourceType : type;
      const id = d.pick(IDS.slice(0, 6));
      if (method === 'PUT' && d.chance(0.8)) made.id = id;
      path = `/fhir/${rt}${method === 'PUT' ? `/${id}` : ''}`;
      what = `${method} ${rt}`;
    }
  }
  let body = form;
  if (text !== undefined) {
    body = bytesOf(text);
  } else if (doc !== undefined) {
    headers['content-type'] = d.chance(0.85) ? 'application/fhir+json' : d.pick(CONTENT_TYPES);
    body = d.chance(0.05) ? jsonBody(doc).subarray(0, d.int(200)) : jsonBody(doc);
    if (d.chance(0.03)) {
      const at = d.int(body.length + 1);
      body = Buffer.concat([body.subarray(0, at), Buffer.from(rawBytes(d)), body.subarray(at)]);
    }
    if (d.chance(0.01)) body = Buffer.concat([Buffer.from(d.pick([[0xef, 0xbb, 0xbf], [0xff, 0xfe], [0xfe, 0xff]])), body]);
  }
  if (d.chance(0.05)) headers.prefer = d.pick(['respond-async', 'return=minimal', 'return=OperationOutcome', 'handling=strict', 'x'.repeat(500)]);
  if (d.chance(0.12)) for (let i = 0, n = 1 + d.int(3); i < n; i++) headers[d.pick(HOSTILE_HEADER_NAMES)] = wireHeader(d);
  return { method, path, headers, body, what };
}

/** The guard's own endpoints, with broken forms, JSON and query strings. */
function guardCase(d: Dice): Omit<FuzzCase, 'index' | 'auth'> {
  const headers: Record<string, string> = {};
  if (d.chance(0.15)) {
    // The additional security layer (gemSpec_ZETA ASL): its handshake and encrypted messages are CBOR; here bytes that are not.
    const path = d.pick(['/ASL', '/ASL', `/ASL/${wireText(d)}`, `/ASL/${d.pick(['x', 'a'.repeat(64), '0'])}`, `/CertData.${wireText(d)}`, '/CertData.', `/svc/v${d.pick(['0', '2', '99', 'x', '1.0', wireText(d)])}/token`]);
    const method = path.startsWith('/CertData') ? d.pick(['GET', 'HEAD']) : 'POST';
    if (method === 'POST') headers['content-type'] = d.pick(['application/cbor', 'application/cbor', 'application/octet-stream', 'application/json', '']);
    const body = method === 'POST' ? Buffer.from(d.chance(0.5) ? highBytes(d, d.int(600)) : Array.from({ length: d.int(300) }, () => d.int(256))) : undefined;
    return { method, path, headers, body, what: `guard ${method} ${path.split('/')[1].slice(0, 12)}` };
  }
  const endpoint = d.pick(['/svc/v1/token', '/svc/v1/register', '/svc/v1/revoke', '/svc/v1/nonce', '/svc/v1/par', '/svc/v1/authorize', '/svc/v1/redirect', '/svc/v1/openid-providers', '/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/fhir', '/.well-known/openid-configuration', '/svc/v1/jwks', '/svc/v1/foo']);
  const fields = ['grant_type', 'subject_token', 'subject_token_type', 'client_assertion', 'client_assertion_type', 'refresh_token', 'token', 'scope', 'resource', 'client_id', 'code', 'code_verifier', 'redirect_uri', 'request_uri', 'state', 'iss', 'idp_iss', 'error', ''];
  const pairs: string[] = [];
  for (let i = 0, n = d.int(6); i < n; i++) {
    const value = d.chance(0.3) ? wireText(d) : enc(String(d.pick([...STRINGS, 'urn:ietf:params:oauth:grant-type:token-exchange', 'refresh_token', 'authorization_code', 'eyJhbGciOiJFUzI1NiJ9.e30.x', 'a.b.c', 'urn:ietf:params:oauth:token-type:jwt', 'urn:ietf:params:oauth:request_uri:x'])));
    pairs.push(`${d.chance(0.1) ? wireText(d) : d.pick(fields)}=${value}`);
  }
  let body: Buffer | undefined;
  const method = /well-known|nonce|jwks|authorize|redirect|providers/.test(endpoint) || d.chance(0.1) ? d.pick(['GET', 'HEAD', 'POST']) : 'POST';
  let path = endpoint;
  if (method === 'POST') {
    if (endpoint.endsWith('register') || d.chance(0.2)) {
      headers['content-type'] = d.pick(['application/json', 'application/json', 'text/plain']);
      body = jsonBody(mutate(d, { client_name: 'fuzz', jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }] }, grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'], token_endpoint_auth_method: 'private_key_jwt', redirect_uris: ['https://app.test/cb'] }));
    } else {
      headers['content-type'] = d.pick(['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded', 'application/json', '', 'application/x-www-form-urlencoded; charset=iso-8859-1']);
      body = Buffer.from(pairs.join('&'), 'latin1');
    }
  } else if (pairs.length) {
    path = `${endpoint}?${pairs.join('&')}`;
  }
  if (d.chance(0.5)) headers.dpop = d.pick(['x', 'a.b.c', 'eyJhbGciOiJub25lIn0.e30.', 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7fX0.e30.AA', '', wireHeader(d)]);
  if (d.chance(0.1)) headers[d.pick(HOSTILE_HEADER_NAMES)] = wireHeader(d);
  return { method, path, headers, body, what: `guard ${method} ${endpoint}` };
}

/** Credentials that are not: a malformed or foreign token, another scheme, junk proofs. */
function brokenCredentials(d: Dice, headers: Record<string, string>): void {
  headers.authorization = d.pick(['DPoP x', 'DPoP a.b.c', 'Bearer x', 'DPoP ', 'DPoP eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjF9.AA', 'Basic Zm9vOmJhcg==', 'x'.repeat(9000), `DPoP ${wireHeader(d)}`, wireHeader(d), 'DPoP eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.']);
  if (d.chance(0.7)) headers.dpop = d.pick(['x', 'a.b.c', 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7fX0.e30.AA', '', wireHeader(d)]);
}

const FHIR_PATCH_CANCEL = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };
const fixed = new Dice(prng(16));
const json = { 'content-type': 'application/fhir+json' };

/** The exact inputs of earlier outside fuzz runs (each answered 500 on a store then), and their closest relatives. */
const KNOWN: readonly Omit<FuzzCase, 'index' | 'auth'>[] = [
  { method: 'GET', path: '/fhir/Slot?_type:not-in=&&&&==&;;&#', headers: {}, what: 'outside run: _type:not-in without a value among empty pairs' },
  { method: 'GET', path: '/fhir/Slot/%ff%fe', headers: {}, what: 'outside run: an id of invalid UTF-8' },
  { method: 'PATCH', path: '/fhir/Appointment/x%ED%BF%BFy', headers: json, body: jsonBody(FHIR_PATCH_CANCEL), what: 'outside run: PATCH of an id with an encoded surrogate' },
  { method: 'PATCH', path: '/fhir/Appointment/x%ED%BF%BFy', headers: { 'content-type': 'application/json-patch+json' }, body: jsonBody([{ op: 'replace', path: '/status', value: 'cancelled' }]), what: 'outside run: JSON Patch of an id with an encoded surrogate' },
  { method: 'GET', path: '/fhir/Appointment/?identifier:below=%00', headers: {}, what: 'outside run: identifier:below of a NUL' },
  { method: 'GET', path: '/fhir/Patient?=x', headers: {}, what: 'outside run: a query parameter without a name' },
  { method: 'GET', path: '/fhir/Appointment?=&status=booked', headers: {}, what: 'outside run: an empty pair before a parameter' },
  { method: 'GET', path: '/fhir/Appointment?patient.name%00=x', headers: {}, what: 'outside run: a NUL in a chained parameter name' },
  { method: 'GET', path: '/fhir/Appointment?patient%00.identifier=x', headers: {}, what: 'outside run: a NUL in a chain link' },
  { method: 'GET', path: '/fhir/Slot?schedule.actor%00:Practitioner.name=x', headers: {}, what: 'outside run: a NUL before a chain type' },
  { method: 'POST', path: '/fhir/Appointment/_search', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: Buffer.from('patient.name%00=x&=y'), what: 'outside run: a form search with a NUL in a chained name and no name' },
  { method: 'POST', path: '/fhir/Patient', headers: json, body: jsonBody({ ...patient(fixed), identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: 'é'.repeat(2000) }] }), what: 'outside run: a Patient identifier of 4,000 bytes' },
  { method: 'POST', path: '/fhir/Patient', headers: json, body: jsonBody({ ...patient(fixed), name: [{ family: multibyte(fixed, 1500), given: [anyChars(fixed, 3000)] }] }), what: 'outside run: a Patient name of random multibyte characters' },
  { method: 'GET', path: `/fhir/Patient?identifier=${enc('€'.repeat(1000))}`, headers: {}, what: 'outside run: a search by an identifier of 3,000 bytes' },
  {
    method: 'POST',
    path: '/fhir',
    headers: json,
    body: jsonBody({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Patient/%ff%fe' } }, { request: { method: 'GET', url: 'Appointment?=x&patient.name%00=y' } }] }),
    what: 'outside run: a transaction of the undecodable URLs',
  },
];
/** Who sends each known input: every kind of session, and nobody. */
const KNOWN_CALLERS: readonly Credentials[] = [...SESSION_KINDS.map((session) => ({ session })), {}];

/**
 * Case `index` of the stream of `seed`. The first cases are the known inputs from every caller;
 * then 8 in 100 go to the guard's endpoints, the others to /fhir: 77 in 100 with a valid session
 * (owner, requestor, patient, workload), 12 with a session and one flaw, 5 with broken
 * credentials, 6 with none.
 */
export function fuzzCase(seed: number, index: number): FuzzCase {
  if (index < KNOWN.length * KNOWN_CALLERS.length) {
    const known = KNOWN[Math.floor(index / KNOWN_CALLERS.length)];
    return { index, ...known, headers: { ...known.headers }, auth: KNOWN_CALLERS[index % KNOWN_CALLERS.length] };
  }
  const d = new Dice(prng((seed * 1_000_003 + index) >>> 0));
  if (d.chance(0.08)) return { index, ...guardCase(d), auth: {} };
  const c = fhirCase(d);
  const r = d.next();
  let auth: Credentials = {};
  if (r < 0.3) auth = { session: 'owner' };
  else if (r < 0.52) auth = { session: 'requestor' };
  else if (r < 0.67) auth = { session: 'patient' };
  else if (r < 0.77) auth = { session: 'workload' };
  else if (r < 0.89) auth = { session: d.pick(SESSION_KINDS), flaw: d.pick(FLAWS) };
  else if (r < 0.94) brokenCredentials(d, c.headers);
  return { index, ...c, auth };
}
