import type { Resource } from '@medplum/fhirtypes';
import type { AppContext } from '../../src/context';
import { Repository } from '../../src/store/repository';
import { parseSearch } from '../../src/fhir/search-request';
import { createTestContext } from '../helpers/context';
import { statementRecorder } from '../helpers/statements';
import type { Db } from '../../src/store/db';
import { executeSearch } from '../../src/store/search/sql';
import { PUBLIC_TO_PATIENTS } from '../../src/server-lib/owner';

const BASE = 'http://localhost:8080/fhir';
const ST = 'http://terminology.hl7.org/CodeSystem/service-type';
const IHE = 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen';
const TAG = 'http://fhir.de/CodeSystem/common-meta-tag-de';

const fixtures: Resource[] = [
  { resourceType: 'Practitioner', id: 'doc1', name: [{ family: 'Müller', given: ['Anna'] }] },
  { resourceType: 'HealthcareService', id: 'hs1', active: true, name: 'General consultation office of the Neurology department', type: [{ coding: [{ system: ST, code: '177' }] }] },
  { resourceType: 'HealthcareService', id: 'hs2', active: false, name: 'Kardiologie', type: [{ coding: [{ system: ST, code: '124' }] }] },
  {
    resourceType: 'Schedule',
    id: 's1',
    active: true,
    meta: { tag: [{ system: TAG, code: 'external' }] },
    serviceType: [{ coding: [{ system: ST, code: '177' }] }],
    specialty: [{ coding: [{ system: IHE, code: 'NEUR' }] }],
    actor: [{ reference: 'Practitioner/doc1', display: 'Dr. Müller' }],
  },
  {
    resourceType: 'Schedule',
    id: 's2',
    active: false,
    serviceType: [{ coding: [{ system: ST, code: '124' }] }],
    specialty: [{ coding: [{ system: 'urn:oid:1.2.276.0.76.5.114', code: '142' }] }],
    actor: [{ reference: 'HealthcareService/hs1' }],
  },
  { resourceType: 'Slot', id: 'sl1', schedule: { reference: 'Schedule/s1' }, serviceType: [{ coding: [{ system: ST, code: '177' }] }], status: 'free', start: '2027-01-01T09:00:00Z', end: '2027-01-01T09:30:00Z' },
  { resourceType: 'Slot', id: 'sl2', schedule: { reference: 'Schedule/s1' }, status: 'busy', start: '2027-01-01T13:00:00Z', end: '2027-01-01T14:00:00Z' },
  {
    resourceType: 'Slot',
    id: 'sl3',
    schedule: { reference: 'Schedule/s2' },
    serviceType: [{ coding: [{ system: ST, code: '124' }] }, { coding: [{ code: '177' }] }],
    status: 'free',
    start: '2027-01-02T08:00:00+01:00',
    end: '2027-01-02T08:15:00+01:00',
  },
  { resourceType: 'Slot', id: 'sl4', schedule: { reference: `${BASE}/Schedule/s2` }, serviceType: [{ coding: [{ system: ST, code: '124' }] }], status: 'free', start: '2027-02-10T10:00:00Z', end: '2027-02-10T10:15:00Z' },
  {
    resourceType: 'Appointment',
    id: 'a1',
    status: 'booked',
    start: '2027-01-01T13:00:00Z',
    end: '2027-01-01T14:00:00Z',
    slot: [{ reference: 'Slot/sl2' }],
    serviceType: [{ coding: [{ system: ST, code: '177' }] }],
    participant: [{ actor: { reference: 'Patient/p1', display: 'Test Patient' }, status: 'accepted' }],
  },
  { resourceType: 'Appointment', id: 'a2', status: 'cancelled', participant: [{ actor: { reference: 'Patient/p2' }, status: 'declined' }] },
  {
    resourceType: 'Encounter',
    id: 'e1',
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
    subject: { reference: 'Patient/p1' },
    period: { start: '2026-12-31T20:00:00Z', end: '2027-01-01T10:00:00Z' },
  },
  {
    resourceType: 'Encounter',
    id: 'e2',
    status: 'in-progress',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' },
    subject: { reference: 'Patient/p2' },
    period: { start: '2027-01-05T08:00:00Z' },
  },
  { resourceType: 'Patient', id: 'p1', gender: 'female' },
  {
    resourceType: 'CodeSystem',
    id: 'cs1',
    url: 'http://terminus.local/cs/services',
    status: 'active',
    content: 'complete',
    useContext: [
      {
        code: { system: 'https://gematik.de/fhir/isik/CodeSystem/ContextType', code: 'ResourceUsage' },
        valueCodeableConcept: { coding: [{ system: 'http://hl7.org/fhir/resource-types', code: 'HealthcareService' }] },
      },
    ],
  },
];

/** PostgreSQL when DATABASE_URL is set (CI), and PGlite always: the same SQL must mean the same. */
const stores: [string, boolean][] = process.env.DATABASE_URL ? [['PostgreSQL', false], ['PGlite', true]] : [['PGlite', true]];

describe.each(stores)('search semantics on the index tables (%s)', (_store, pglite) => {
  let ctx: AppContext;
  let repo: Repository;
  beforeAll(async () => {
    ctx = await createTestContext({ pglite });
    repo = new Repository(ctx.db, BASE);
    for (const r of fixtures) await repo.update(r);
  });
  afterAll(() => ctx.db.close());

  const ids = async (type: string, query: string) => {
    const { request } = parseSearch(type, [...new URLSearchParams(query).entries()]);
    const result = await repo.search(request);
    return result.resources.map((r) => r.id).sort();
  };

  const CASES: [string, string, string[]][] = [
    // token
    ['Schedule', 'active=true', ['s1']],
    ['Schedule', 'service-type=177', ['s1']],
    ['Schedule', `service-type=${ST}|177`, ['s1']],
    ['Schedule', `service-type=${ST}|`, ['s1', 's2']],
    ['Schedule', 'service-type=|177', []],
    ['Schedule', `specialty=urn:oid:1.2.276.0.76.5.114|142,${IHE}|NEUR`, ['s1', 's2']],
    ['Schedule', 'specialty:not=NEUR', ['s2']],
    ['Appointment', 'service-type:not=177', ['a2']],
    ['Schedule', `_tag=${TAG}|external`, ['s1']],
    ['Schedule', '_id=s1,s2', ['s1', 's2']],
    ['Appointment', 'status=cancelled', ['a2']],
    ['Appointment', 'status=booked&status=cancelled', []],
    // a primitive code carries the system of its required binding's one CodeSystem
    ['Slot', 'schedule=s1&status=http://hl7.org/fhir/slotstatus|busy', ['sl2']],
    ['Slot', 'schedule=s1&status=http://hl7.org/fhir/slotstatus|', ['sl1', 'sl2']],
    ['Slot', 'schedule=s1&status=http://hl7.org/fhir/slotstatus|busy&start=ge2027-01-01', ['sl2']],
    ['Slot', 'schedule=s1&status=http://example.org/other|busy', []],
    ['Appointment', 'status=http://hl7.org/fhir/appointmentstatus|cancelled', ['a2']],
    ['Patient', 'gender=http://hl7.org/fhir/administrative-gender|female', ['p1']],
    ['Encounter', 'status=http://hl7.org/fhir/encounter-status|finished', ['e1']],
    // reference
    ['Schedule', 'actor=Practitioner/doc1', ['s1']],
    ['Slot', 'schedule=s1', ['sl1', 'sl2']],
    ['Slot', `schedule=${BASE}/Schedule/s2`, ['sl3', 'sl4']],
    ['Slot', 'schedule=Schedule/s2', ['sl3', 'sl4']],
    ['Appointment', 'slot=sl2', ['a1']],
    ['Appointment', 'actor=Patient/p1', ['a1']],
    ['Appointment', 'patient=p2', ['a2']],
    ['Schedule', 'actor:HealthcareService=hs1', ['s2']],
    // date, with precision
    ['Slot', 'start=2027-01-01', ['sl1', 'sl2']],
    ['Slot', 'start=2027-01', ['sl1', 'sl2', 'sl3']],
    ['Slot', 'start=ge2027-01-02', ['sl3', 'sl4']],
    ['Slot', 'start=gt2027-01-01', ['sl3', 'sl4']],
    ['Slot', 'start=lt2027-01-01T13:00:00Z', ['sl1']],
    ['Slot', 'start=le2027-01-01T13:00:00Z', ['sl1', 'sl2']],
    ['Slot', 'start=ge2027-01-01&start=le2027-01-31', ['sl1', 'sl2', 'sl3']],
    ['Slot', 'start=ne2027-01-01', ['sl3', 'sl4']],
    ['Slot', 'start=sa2027-01-31', ['sl4']],
    ['Slot', 'start=eb2027-01-02', ['sl1', 'sl2']],
    ['Slot', 'start=2027-01-02T07:00:00Z', ['sl3']],
    ['Appointment', 'date=2027-01-01', ['a1']],
    ['Slot', 'start=ap2027-01-01T12:00:00Z', ['sl1', 'sl2', 'sl3']],
    ['Slot', 'start=ap2030-01-01', []],
    ['Slot', `_lastUpdated=ge${new Date(Date.now() - 3600_000).toISOString().slice(0, 19)}Z&_id=sl1`, ['sl1']],
    ['Slot', '_lastUpdated=lt2000-01-01', []],
    ['Slot', '_id:not=sl1&schedule=s1', ['sl2']],
    ['Appointment', 'date:missing=true', ['a2']],
    // Period targets (R4 search.html prefixes): e1 = 2026-12-31T20:00Z..2027-01-01T10:00Z, e2 = 2027-01-05T08:00Z..open.
    // ge = the range above the search value overlaps the target, or the search value contains it:
    // e1 only overlaps 2027-01-01 from below and contains no part above it, so it is not ge2027-01-01.
    ['Encounter', 'date=ge2027-01-01', ['e2']],
    ['Encounter', 'date=ge2026-12-31', ['e1', 'e2']],
    ['Encounter', 'date=le2026-12-31', []],
    ['Encounter', 'date=le2027-01-01', ['e1']],
    ['Encounter', 'date=gt2026-12-31', ['e1', 'e2']],
    ['Encounter', 'date=lt2027-01-01', ['e1']],
    ['Encounter', 'date=2027-01-01', []],
    ['Encounter', 'date=2027', []],
    ['Encounter', 'date=ne2027-01-01', ['e1', 'e2']],
    ['Encounter', 'date=sa2026-12-31', ['e2']],
    ['Encounter', 'date=eb2027-01-05', ['e1']],
    ['Encounter', 'date=ge2026-12-31&date=le2027-01-01', ['e1']],
    ['Encounter', 'date=ge2026-12-31T20:00:00Z', ['e1', 'e2']],
    ['Encounter', 'date=le2027-01-01T10:00:00Z', ['e1']],
    // ISiK date-start / end-date (Encounter.period.start / .end)
    ['Encounter', 'date-start=2026-12-31', ['e1']],
    ['Encounter', 'date-start=ge2027-01-01', ['e2']],
    ['Encounter', 'end-date=2027-01-01', ['e1']],
    ['Encounter', 'end-date=lt2027-01-02', ['e1']],
    ['Encounter', 'end-date:missing=true', ['e2']],
    // string
    ['HealthcareService', 'name=general', ['hs1']],
    ['HealthcareService', 'name=General%20consultation%20office%20of%20the%20Neurology%20department', ['hs1']],
    ['HealthcareService', 'name:contains=neurology', ['hs1']],
    ['HealthcareService', 'name:exact=kardiologie', []],
    ['HealthcareService', 'name:exact=Kardiologie', ['hs2']],
    ['Practitioner', 'name=muller', ['doc1']],
    // served by the compound (schedule, status, start) index
    ['Slot', 'schedule=s1&status=free&start=ge2027-01-01&start=le2027-01-31', ['sl1']],
    ['Slot', 'schedule=Schedule/s2&start=2027-01-02', ['sl3']],
    ['Slot', `schedule=${BASE}/Schedule/s2&status=free&start=gt2027-01-05`, ['sl4']],
    ['Slot', 'schedule=s1&status=busy&start=ge2027-01-01T13:00:00Z', ['sl2']],
    ['Slot', 'schedule=s1&status=free&start=ge2028-01-01', []],
    ['Slot', 'schedule=s1&status:not=free&start=le2027-12-31', ['sl2']],
    // chains and _has
    ['Slot', 'schedule.actor=Practitioner/doc1', ['sl1', 'sl2']],
    ['Slot', `schedule.actor:HealthcareService.type=${ST}|177`, ['sl3', 'sl4']],
    ['Slot', '_has:Appointment:slot:status=booked', ['sl2']],
    // a chain through the compound index's reference with a date: the chain's targets, then their compound rows
    ['Slot', 'schedule.actor=Practitioner/doc1&status=free&start=ge2027-01-01&start=le2027-01-31', ['sl1']],
    ['Slot', 'schedule.actor=Practitioner/doc1&start=ge2027-01-01', ['sl1', 'sl2']],
    ['Slot', 'schedule.actor=Practitioner/doc1&status=busy&start=ge2027-01-01T13:00:00Z', ['sl2']],
    ['Slot', `schedule.actor:HealthcareService.type=${ST}|177&start=2027-01-02`, ['sl3']],
    ['Slot', 'schedule.actor=Practitioner/nobody&start=ge2027-01-01', []],
    ['Slot', 'schedule.actor=Practitioner/doc1&start=ge2028-01-01', []],
    // ... the chain's targets through their own lookup index (a reference, a token), or checked one by one (:not, :missing)
    ['Slot', 'schedule.actor:Practitioner=doc1&start=ge2027-01-01', ['sl1', 'sl2']],
    ['Slot', 'schedule.active=true&status=free&start=ge2027-01-01', ['sl1']],
    ['Slot', 'schedule.active:not=true&start=ge2027-01-01', ['sl3', 'sl4']],
    ['Slot', 'schedule.actor:missing=false&start=2027-01-02', ['sl3']],
    ['Slot', `schedule.service-type=${ST}|124&start=ge2027-01-01&start=le2027-01-31`, ['sl3']],
    // a service on a day: the token-and-date (service-type, start) index
    ['Slot', `service-type=${ST}|177&start=ge2027-01-01&start=le2027-01-31`, ['sl1']],
    ['Slot', 'service-type=124&start=ge2027-01-01', ['sl3', 'sl4']],
    ['Slot', 'service-type=124&start=2027-01-02', ['sl3']],
    ['Slot', `service-type=${ST}|124&start=gt2027-01-05`, ['sl4']],
    ['Slot', 'service-type=177&start=ge2027-01-01', ['sl1', 'sl3']],
    ['Slot', 'service-type=|177&start=ge2027-01-01', ['sl3']],
    ['Slot', `service-type=${ST}|177&start=ge2028-01-01`, []],
    ['Slot', `service-type=${ST}|177&start=lt2027-01-01T09:00:00Z`, []],
    ['Slot', `service-type=${ST}|124&status=free&start=le2027-01-31`, ['sl3']],
    ['Slot', `service-type=${ST}|&start=ge2027-01-01`, ['sl1', 'sl3', 'sl4']],
    ['Slot', `service-type:not=${ST}|124&start=ge2027-01-01`, ['sl1', 'sl2']],
    ['Slot', `service-type=${ST}|124,${ST}|177&start=2027-01-01`, ['sl1']],
    // composite
    ['CodeSystem', 'context-type-value=https://gematik.de/fhir/isik/CodeSystem/ContextType|ResourceUsage$http://hl7.org/fhir/resource-types|HealthcareService', ['cs1']],
    ['CodeSystem', 'context-type-value=ResourceUsage$Schedule', []],
    // uri
    ['CodeSystem', 'url=http://terminus.local/cs/services', ['cs1']],
  ];
  test.each(CASES)('%s?%s', async (type, query, expected) => {
    expect(await ids(type, query)).toEqual(expected);
  });

  test("an institution sees nobody's slots and its own, never another's, by every driver; each candidate's owner is looked up only while another's slot exists", async () => {
    const requestor = { institution: '1-OWNED-A', isOwner: false };
    const other = { institution: '1-OWNED-B', isOwner: false };
    const QUERIES = [
      'schedule=Schedule/s1&start=ge2027-03-01&start=le2027-03-31', // the compound (reference, date) index
      `service-type=${ST}|177&start=ge2027-03-01&start=le2027-03-31`, // the token-and-date index
      'schedule.actor=Practitioner/doc1&start=ge2027-03-01&start=le2027-03-31', // a chain
      'start=ge2027-03-01&start=le2027-03-31', // the date index
    ];
    const seen = async (query: string, caller: typeof requestor) => {
      const { request } = parseSearch('Slot', [...new URLSearchParams(query).entries()]);
      return (await repo.search(request, caller)).resources.map((r) => r.id).sort();
    };
    /** How often the search's plan looked up a candidate's own row for its owner (EXPLAIN ANALYZE of the very statement). */
    const ownerLookups = async (query: string, caller: typeof requestor) => {
      const sent: { text: string; values: unknown[] }[] = [];
      const capture = { kind: ctx.db.kind, inTransaction: true, query: async (text: string, values: unknown[] = []) => (sent.push({ text, values }), { rows: [], rowCount: 0 }) } as unknown as Db;
      await executeSearch(capture, parseSearch('Slot', [...new URLSearchParams(query).entries()]).request, { scope: caller, now: new Date(), baseUrl: BASE });
      const { rows } = await ctx.db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sent[0].text}`, sent[0].values);
      const plan = rows[0]['QUERY PLAN'];
      let loops = 0;
      const walk = (node: Record<string, unknown>) => {
        if (node['Relation Name'] === 'resource' && node.Alias === 'o') loops += Number(node['Actual Loops'] ?? 0);
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk(((typeof plan === 'string' ? JSON.parse(plan) : plan) as { Plan: Record<string, unknown> }[])[0].Plan);
      return loops;
    };
    const slot = (id: string) => ({ resourceType: 'Slot', id, schedule: { reference: 'Schedule/s1' }, serviceType: [{ coding: [{ system: ST, code: '177' }] }], status: 'free', start: `2027-03-0${id.slice(-1)}T09:00:00Z`, end: `2027-03-0${id.slice(-1)}T09:15:00Z` }) as Resource;
    await repo.update(slot('sl-public-1'));
    await repo.update(slot('sl-public-2'));
    for (const q of QUERIES) {
      expect([q, await seen(q, requestor)]).toEqual([q, ['sl-public-1', 'sl-public-2']]);
      expect([q, await ownerLookups(q, requestor)]).toEqual([q, 0]);
    }
    // A slot of the requestor's own: still no lookup (nothing belongs to another), and it is seen.
    await repo.update(slot('sl-own-3'), { owner: requestor.institution });
    for (const q of QUERIES) {
      expect([q, await seen(q, requestor)]).toEqual([q, ['sl-own-3', 'sl-public-1', 'sl-public-2']]);
      expect([q, await ownerLookups(q, requestor)]).toEqual([q, 0]);
    }
    // Another institution's slot: each candidate is checked, and it stays hidden from the requestor.
    await repo.update(slot('sl-other-4'), { owner: other.institution });
    for (const q of QUERIES) {
      expect([q, await seen(q, requestor)]).toEqual([q, ['sl-own-3', 'sl-public-1', 'sl-public-2']]);
      expect([q, await seen(q, other)]).toEqual([q, ['sl-other-4', 'sl-public-1', 'sl-public-2']]);
      expect([q, await ownerLookups(q, requestor)]).toEqual([q, expect.any(Number)]);
    }
    expect(await ownerLookups(QUERIES[0], requestor)).toBeGreaterThan(0);
    for (const id of ['sl-public-1', 'sl-public-2', 'sl-own-3', 'sl-other-4']) await repo.delete('Slot', id);
  });

  test('the partial index of owned public resources lists exactly the types everyone may see', async () => {
    const { rows } = await ctx.db.query<{ def: string }>("SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indexrelid = 'resource_owned_public'::regclass");
    const listed = [...rows[0].def.matchAll(/'([A-Za-z]+)'::text/g)].map((m) => m[1]).sort();
    expect(listed).toEqual([...PUBLIC_TO_PATIENTS].sort());
  });

  test('a service on a day is driven by the token-and-date index, which follows a changed service and a deleted slot', async () => {
    const recorder = statementRecorder();
    recorder.start();
    try {
      expect(await ids('Slot', `service-type=${ST}|177&start=ge2027-01-01&start=le2027-01-31`)).toEqual(['sl1']);
    } finally {
      recorder.stop();
    }
    expect(recorder.sent.filter((q) => q.includes('FROM search_token_date'))).toHaveLength(1);
    const sl1 = fixtures.find((r) => r.id === 'sl1')!;
    await repo.update({ ...sl1, id: 'sl9', serviceType: [{ coding: [{ system: ST, code: '177' }] }] } as Resource);
    expect(await ids('Slot', `service-type=${ST}|177&start=2027-01-01`)).toEqual(['sl1', 'sl9']);
    await repo.update({ ...sl1, id: 'sl9', serviceType: [{ coding: [{ system: ST, code: '124' }] }] } as Resource);
    expect(await ids('Slot', `service-type=${ST}|177&start=2027-01-01`)).toEqual(['sl1']);
    expect(await ids('Slot', `service-type=${ST}|124&start=2027-01-01`)).toEqual(['sl9']);
    await repo.delete('Slot', 'sl9');
    expect(await ids('Slot', `service-type=${ST}|124&start=2027-01-01`)).toEqual([]);
    const { rows } = await ctx.db.query<{ n: string }>("SELECT count(*) AS n FROM search_token_date WHERE resource_type = 'Slot' AND id = 'sl9'");
    expect(Number(rows[0].n)).toBe(0);
  });

  test('window rows: a range of a day is found from up to 24 h before the window (B-tree), a longer one through the GiST of long ranges', async () => {
    const at = (id: string, start: string) => ({ resourceType: 'Slot', id, schedule: { reference: 'Schedule/s1' }, serviceType: [{ coding: [{ system: ST, code: '177' }] }], status: 'free', start, end: start }) as Resource;
    // Stored as given (no validation here): a date, a month.
    await repo.update(at('sl-day', '2027-04-10'));
    await repo.update(at('sl-month', '2027-05'));
    try {
      const { rows } = await ctx.db.query<{ id: string; c: boolean; t: boolean }>(
        `SELECT c.id, c.short AS c, t.short AS t FROM search_compound c JOIN search_token_date t USING (resource_type, id) WHERE c.resource_type = 'Slot' AND c.id IN ('sl-day', 'sl-month') ORDER BY c.id`,
      );
      expect(rows).toEqual([
        { id: 'sl-day', c: true, t: true },
        { id: 'sl-month', c: false, t: false },
      ]);
      const day = 'start=ge2027-04-10T12:00:00Z&start=le2027-04-10T13:00:00Z';
      const month = 'start=ge2027-05-20&start=le2027-05-21';
      for (const [lead, window, expected] of [
        ['schedule=s1&status=free', day, ['sl-day']],
        ['schedule=s1&status=free', month, ['sl-month']],
        ['schedule.actor=Practitioner/doc1', day, ['sl-day']],
        ['schedule.actor=Practitioner/doc1', month, ['sl-month']],
        [`service-type=${ST}|177`, day, ['sl-day']],
        [`service-type=${ST}|177`, month, ['sl-month']],
        ['schedule=s1', 'start=ge2027-04-11', ['sl-month']],
      ] as const) {
        expect([lead, window, await ids('Slot', `${lead}&${window}`)]).toEqual([lead, window, expected]);
      }
    } finally {
      await repo.delete('Slot', 'sl-day');
      await repo.delete('Slot', 'sl-month');
    }
  });

  test("a chain's targets through their lookup index leave out a deleted target", async () => {
    await repo.update({ resourceType: 'Schedule', id: 's9', active: true, actor: [{ reference: 'Practitioner/doc9' }] } as Resource);
    await repo.update({ resourceType: 'Slot', id: 'sl8', schedule: { reference: 'Schedule/s9' }, status: 'free', start: '2027-03-01T09:00:00Z', end: '2027-03-01T09:15:00Z' } as Resource);
    expect(await ids('Slot', 'schedule.actor=Practitioner/doc9&start=2027-03-01')).toEqual(['sl8']);
    await repo.delete('Schedule', 's9');
    expect(await ids('Slot', 'schedule.actor=Practitioner/doc9&start=2027-03-01')).toEqual([]);
    await repo.delete('Slot', 'sl8');
  });

  test('every case at once, twice (searches of one shape asked for together share a statement), answers as each alone', async () => {
    const twice = [...CASES, ...CASES];
    expect(await Promise.all(twice.map(([type, query]) => ids(type, query)))).toEqual(twice.map(([, , expected]) => expected));
  });

  test('pages of one search shape asked for together come back each in its own order, with its own total', async () => {
    const { request } = parseSearch('Slot', [['_count', '1'], ['_sort', 'start']]);
    const pages = await Promise.all([0, 1, 2, 3, 4].map((offset) => repo.search({ ...request, offset })));
    expect(pages.map((r) => r.resources.map((x) => x.id))).toEqual([['sl1'], ['sl2'], ['sl3'], ['sl4'], []]);
    expect(pages.map((r) => r.total)).toEqual([4, 4, 4, 4, 4]);
  });

  test('`|code` never matches a bound code: R4 `|code` asks for a token without system, and a code-typed element has the implicit system of its required binding', async () => {
    expect(await ids('Slot', 'schedule=s1&status=|busy')).toEqual([]);
    expect(await ids('Slot', 'schedule=s1&status=busy')).toEqual(['sl2']);
  });

  test('_include=Encounter:patient adds the subject Patient', async () => {
    const { request } = parseSearch('Encounter', [['_id', 'e1'], ['_include', 'Encounter:patient']]);
    const result = await repo.search(request);
    expect(result.included.map((r) => `${r.resourceType}/${r.id}`)).toEqual(['Patient/p1']);
  });

  test('total, count and offset page through results', async () => {
    const { request } = parseSearch('Slot', [['_count', '2'], ['_sort', 'start']]);
    const first = await repo.search(request);
    expect(first.total).toBe(4);
    expect(first.resources.map((r) => r.id)).toEqual(['sl1', 'sl2']);
    const second = await repo.search({ ...request, offset: 2 });
    expect(second.resources.map((r) => r.id)).toEqual(['sl3', 'sl4']);
  });

  test('descending sort on a date parameter', async () => {
    const { request } = parseSearch('Slot', [['_sort', '-start']]);
    expect((await repo.search(request)).resources.map((r) => r.id)).toEqual(['sl4', 'sl3', 'sl2', 'sl1']);
  });

  test('_include and _revinclude add the referenced and referring resources', async () => {
    const { request } = parseSearch('Slot', [['_id', 'sl2'], ['_include', 'Slot:schedule'], ['_revinclude', 'Appointment:slot']]);
    const result = await repo.search(request);
    expect(result.resources.map((r) => r.id)).toEqual(['sl2']);
    expect(result.included.map((r) => `${r.resourceType}/${r.id}`).sort()).toEqual(['Appointment/a1', 'Schedule/s1']);
  });

  test('unknown parameters are ignored with a warning, or rejected when strict', () => {
    const lenient = parseSearch('Slot', [['colour', 'blue']]);
    expect(lenient.warnings).toHaveLength(1);
    expect(lenient.warnings[0].code).toBe('not-supported');
    expect(() => parseSearch('Slot', [['colour', 'blue']], true)).toThrow(/colour/);
  });

  test.each([
    ['start', 'tomorrow'],
    ['start', 'ge2027-13-01'],
    ['_count', 'ten'],
    ['_lastUpdated', 'yesterday'],
  ])('a malformed %s=%s is a 400', (name, value) => {
    try {
      parseSearch('Slot', [[name, value]]);
      throw new Error('expected a 400');
    } catch (err) {
      expect((err as { status: number }).status).toBe(400);
    }
  });

  test('deleted resources leave the index and reads answer 410', async () => {
    await repo.update({ resourceType: 'Practitioner', id: 'gone1', name: [{ family: 'Weg' }] });
    await repo.delete('Practitioner', 'gone1');
    expect(await ids('Practitioner', 'name=weg')).toEqual([]);
    await expect(repo.read('Practitioner', 'gone1')).rejects.toMatchObject({ status: 410 });
  });

  test('every write keeps the previous version', async () => {
    await repo.update({ resourceType: 'Practitioner', id: 'v1', name: [{ family: 'Eins' }] });
    const second = await repo.update({ resourceType: 'Practitioner', id: 'v1', name: [{ family: 'Zwei' }] });
    expect((second.resource as Resource).meta?.versionId).toBe('2');
    const history = await repo.history('Practitioner', 'v1');
    expect(history.map((h) => h.versionId)).toEqual([2, 1]);
    const first = await repo.vread('Practitioner', 'v1', '1');
    expect((first as { name: { family: string }[] }).name[0].family).toBe('Eins');
    await expect(repo.update({ resourceType: 'Practitioner', id: 'v1' }, { ifMatch: 'W/"1"' })).rejects.toMatchObject({ status: 412 });
  });
});
