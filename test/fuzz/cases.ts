/**
 * Seeded hostile requests for the FHIR layer and the guard's endpoints (issue 16): the same seed
 * gives the same cases, so a finding is replayed from its seed and index. Cases start from valid
 * shapes (resources, $book parameters, FHIRPath Patch, transaction Bundles, searches) and break
 * them in the ways the first fuzz run found harmful: wrong JSON types, primitive extensions that
 * are not objects, NULs, long and non-BMP strings, deep nesting, unknown operations and
 * parameters, malformed dates, headers that contradict the body.
 */

export interface FuzzCase {
  index: number;
  method: string;
  /** Path and query, already percent-encoded where HTTP requires it. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** One line on what the case is, for the report. */
  what: string;
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
    case 4:
    case 5:
      return d.pick(STRINGS);
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

function nest(depth: number): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = { extension: [{ url: 'http://x.test', extension: [v] }] };
  return v;
}

const iso = (offsetDays: number, hour: number) => new Date(Date.UTC(2027, 0, 4 + offsetDays, hour)).toISOString();

function patient(d: Dice): Record<string, unknown> {
  return {
    resourceType: 'Patient',
    identifier: [{ system: 'http://fhir.de/sid/gkv/kvid-10', value: `A${String(d.int(1e9)).padStart(9, '0')}`, type: { coding: [{ system: 'http://fhir.de/CodeSystem/identifier-type-de-basis', code: 'KVZ10' }] } }],
    name: [{ use: 'official', family: 'Fuzz', given: ['Erika'] }],
    gender: 'female',
    birthDate: '1970-01-01',
    active: true,
  };
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
      request: { method, url: method === 'POST' ? String(r.resourceType) : `${String(r.resourceType)}/${d.pick(IDS)}` },
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

function searchQuery(d: Dice, type: string): string {
  const params = SEARCH_PARAMS[type] ?? ['_id', 'foo'];
  const n = d.int(4);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    if (d.chance(0.3)) {
      const name = d.pick(RESULT_PARAMS);
      const value = d.pick([String(d.int(5000) - 10), 'x', '', 'json', 'xml', 'application/fhir+xml', 'true', 'count', 'Slot:schedule', 'Appointment:patient', '*', 'status,-start', '-_lastUpdated', 'id,status', ...STRINGS.slice(0, 12)]);
      parts.push(`${enc(name)}=${enc(value)}`);
    } else {
      const name = `${d.pick(params)}${d.pick(MODIFIERS)}`;
      const value = `${d.pick(PREFIXES)}${d.pick(SEARCH_VALUES)}`;
      parts.push(`${enc(name)}=${d.chance(0.1) ? value.replace(/[^A-Za-z0-9]/g, '') : enc(value)}`);
    }
  }
  if (d.chance(0.05)) parts.push('=', '&&', '%ZZ=1', 'a=%E0%A4%A');
  return parts.length ? `?${parts.join('&')}` : '';
}

const CONTENT_TYPES = ['application/fhir+json', 'application/fhir+json; charset=utf-8', 'application/json', 'application/fhir+xml', 'application/json-patch+json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/fhir+json; charset=latin1', ''];
const ACCEPTS = ['application/fhir+json', 'application/fhir+xml', 'application/json', 'text/html', '*/*', 'application/xml', 'foo/bar', ''];

/** The FHIR layer: reads, searches, writes, operations, transactions, patches. */
function fhirCase(d: Dice): Omit<FuzzCase, 'index'> {
  const type = d.pick(TYPES.slice(0, 6).concat(d.chance(0.1) ? TYPES : []));
  const headers: Record<string, string> = {};
  if (d.chance(0.5)) headers.accept = d.chance(0.7) ? 'application/fhir+json' : d.pick(ACCEPTS);
  let method = 'GET';
  let path: string;
  let doc: Record<string, unknown> | undefined;
  let what: string;
  switch (d.int(10)) {
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
      doc = d.chance(0.8) ? mutate(d, fhirPathPatch(d)) : (hostileValue(d) as Record<string, unknown>);
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
    default: {
      method = d.pick(['POST', 'PUT', 'PUT']);
      const make = d.pick([patient, slot, schedule, appointment, subscriptionResource] as ((d: Dice) => Record<string, unknown>)[]);
      doc = mutate(d, make(d));
      const rt = typeof doc.resourceType === 'string' && d.chance(0.8) ? doc.resourceType : type;
      const id = d.pick(IDS.slice(0, 6));
      if (method === 'PUT' && d.chance(0.8)) doc.id = id;
      path = `/fhir/${rt}${method === 'PUT' ? `/${id}` : ''}`;
      what = `${method} ${rt}`;
    }
  }
  let body: Buffer | undefined;
  if (doc !== undefined) {
    headers['content-type'] = d.chance(0.85) ? 'application/fhir+json' : d.pick(CONTENT_TYPES);
    body = Buffer.from(d.chance(0.05) ? JSON.stringify(doc).slice(0, d.int(200)) : JSON.stringify(doc));
    if (d.chance(0.02)) body = Buffer.concat([body.subarray(0, 20), Buffer.from([0xff, 0xfe, 0xc3]), body.subarray(20)]);
  }
  if (d.chance(0.05)) headers.prefer = d.pick(['respond-async', 'return=minimal', 'return=OperationOutcome', 'handling=strict', 'x'.repeat(500)]);
  return { method, path, headers, body, what };
}

/** The guard's own endpoints, with broken forms and JSON. */
function guardCase(d: Dice): Omit<FuzzCase, 'index'> {
  const endpoint = d.pick(['/svc/v1/token', '/svc/v1/register', '/svc/v1/revoke', '/svc/v1/nonce', '/svc/v1/par', '/svc/v1/authorize', '/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', '/svc/v1/jwks', '/svc/v1/foo']);
  const headers: Record<string, string> = {};
  const form = new URLSearchParams();
  const fields = ['grant_type', 'subject_token', 'subject_token_type', 'client_assertion', 'client_assertion_type', 'refresh_token', 'token', 'scope', 'resource', 'client_id', 'code', 'code_verifier', 'redirect_uri'];
  for (let i = 0; i < d.int(6); i++) form.append(d.pick(fields), String(d.pick([...STRINGS, 'urn:ietf:params:oauth:grant-type:token-exchange', 'refresh_token', 'eyJhbGciOiJFUzI1NiJ9.e30.x', 'a.b.c', 'urn:ietf:params:oauth:token-type:jwt'])));
  let body: Buffer | undefined;
  const method = endpoint.includes('well-known') || endpoint.endsWith('nonce') || endpoint.endsWith('jwks') || d.chance(0.1) ? d.pick(['GET', 'HEAD', 'POST']) : 'POST';
  if (method === 'POST') {
    if (endpoint.endsWith('register') || d.chance(0.2)) {
      headers['content-type'] = d.pick(['application/json', 'application/json', 'text/plain']);
      body = Buffer.from(JSON.stringify(mutate(d, { client_name: 'fuzz', jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }] }, grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'], token_endpoint_auth_method: 'private_key_jwt' })));
    } else {
      headers['content-type'] = d.pick(['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded', 'application/json', '']);
      body = Buffer.from(form.toString());
    }
  }
  if (d.chance(0.5)) headers.dpop = d.pick(['x', 'a.b.c', 'eyJhbGciOiJub25lIn0.e30.', 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7fX0.e30.AA', '']);
  return { method, path: endpoint, headers, body, what: `guard ${method} ${endpoint}` };
}

/** /fhir with broken credentials: the enforcement point must refuse them cleanly. */
function credentialCase(d: Dice): Omit<FuzzCase, 'index'> {
  const c = fhirCase(d);
  c.headers.authorization = d.pick(['DPoP x', 'DPoP a.b.c', 'Bearer x', 'DPoP ', 'DPoP eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjF9.AA', 'Basic Zm9vOmJhcg==', 'x'.repeat(9000)]);
  if (d.chance(0.7)) c.headers.dpop = d.pick(['x', 'a.b.c', 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7fX0.e30.AA', '']);
  return { ...c, what: `credentials: ${c.what}` };
}

/** Case `index` of the stream of `seed`; `guarded`: cases for an app with the guard enforcing. */
export function fuzzCase(seed: number, index: number, guarded = false): FuzzCase {
  const d = new Dice(prng((seed * 1_000_003 + index) >>> 0));
  const c = guarded ? credentialCase(d) : d.chance(0.1) ? guardCase(d) : fhirCase(d);
  return { index, ...c };
}
