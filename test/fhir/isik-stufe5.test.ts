import fs from 'node:fs';
import request from 'supertest';
import type { Express } from 'express';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { composeTerminus } from '../../src/app';
import type { AppContext } from '../../src/context';
import { importResources } from '../../src/fhir/import';
import { evalFhirPath } from '../../src/server-lib/medplum';
import { fromXml } from '../../src/model/formats';
import { knownProfiles, validateResource } from '../../src/model/validation';
import { projectPath } from '../../src/server-lib/paths';
import { createTestContext } from '../helpers/context';

/**
 * The read and search scenarios of the gematik ISiK Stufe 5 Terminplanung suite
 * (S5-1 to S5-6, S5-9, S5-10, S5-11) against our fixture Bundle,
 * with the suite's URL shapes (`Type/?param`), XML where the suite asks for XML, and its
 * FHIRPath checks.
 */
const TAG = 'http://fhir.de/CodeSystem/common-meta-tag-de';
const ST = 'http://terminology.hl7.org/CodeSystem/service-type';
const IHE = 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen';
const ISIK = 'https://gematik.de/fhir/isik/StructureDefinition/';
const SPECIALTY_OR = 'urn%3Aoid%3A1.2.276.0.76.5.114%7C142%2Chttp%3A%2F%2Fihe-d.de%2FCodeSystems%2FAerztlicheFachrichtungen%7CNEUR';
const SPECIALTY_OR_MATCH = `specialty.coding.where((system='urn:oid:1.2.276.0.76.5.114' and code='142') or (system='${IHE}' and code='NEUR')).exists()`;

describe('ISiK Stufe 5 Terminplanung read and search scenarios', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    const terminus = composeTerminus(ctx);
    app = terminus.app;
    await importResources(terminus.fhir, JSON.parse(fs.readFileSync(projectPath('fixtures', 'isik-stufe5.json'), 'utf8')) as Bundle);
  });
  afterAll(() => ctx.db.close());

  /** GET in json or xml; asserts 200 and `application/fhir+<fmt>;charset=UTF-8` like IsikGlue. */
  async function get(path: string, format: 'json' | 'xml' = 'json'): Promise<Resource> {
    const res = await request(app).get(`/fhir/${path}`).set('Accept', `application/fhir+${format}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(new RegExp(`^application/fhir\\+${format}.*charset=UTF-8`, 'i'));
    return format === 'xml' ? fromXml(res.text) : (res.body as Resource);
  }
  const fp = (expr: string, r: Resource) => evalFhirPath(expr, r);
  const entries = (b: Resource) => ((b as Bundle).entry ?? []).filter((e) => e.search?.mode !== 'outcome').map((e) => e.resource as Resource);

  let cs: Resource;
  beforeAll(async () => {
    cs = await get('metadata');
  });
  const csHas = (expr: string) => expect(fp(`rest.where(mode='server').resource.${expr}.exists()`, cs)).toEqual([true]);
  const csInteraction = (type: string, code: string) => csHas(`where(type='${type}' and interaction.where(code='${code}').exists())`);
  const csParams = (type: string, params: [string, string][]) => {
    for (const [name, t] of params) csHas(`where(type='${type}' and searchParam.where(name='${name}' and type='${t}').exists())`);
  };

  /**
   * The suite's profile validation (reference validator, plugin isik5): the resource claims the
   * ISiK profile and is valid against it (base R4 when the profile is not one this repository
   * carries, as for Encounter).
   */
  function expectValid(r: Resource, profileName: string): void {
    const url = `${ISIK}${profileName}`;
    expect(r.meta?.profile ?? []).toContain(url);
    if (['ISiKKalender', 'ISiKTerminblock', 'ISiKTermin', 'ISiKMedizinischeBehandlungseinheit', 'ISiKPatient'].includes(profileName)) {
      expect(knownProfiles()).toContain(url);
    }
    expect(validateResource(r, { profiles: 'claimed' })).toEqual({ ok: true });
  }

  /** A search result: the Bundle is valid R4, there is at least one match, each is valid and meets `expr`. */
  function expectAll(bundle: Resource, profileName: string, expr?: string): Resource[] {
    expect(validateResource(bundle)).toEqual({ ok: true });
    const found = entries(bundle);
    expect(found.length).toBeGreaterThan(0);
    for (const r of found) {
      expectValid(r, profileName);
      if (expr) expect({ id: r.id, matches: fp(expr, r) }).toEqual({ id: r.id, matches: [true] });
    }
    return found;
  }
  const tagged = `meta.tag.where(system='${TAG}').all(code='external')`;
  const tagQuery = encodeURIComponent(`${TAG}|external`);

  test('S5-1 Schedule-Read', async () => {
    csInteraction('Schedule', 'read');
    const s = await get('Schedule/Schedule-Read-Example', 'xml');
    expect(s.id).toBe('Schedule-Read-Example');
    expectValid(s, 'ISiKKalender');
    expect(fp('active', s)).toEqual([true]);
    expect(fp(`serviceType.where(text.exists() and coding.where(code='177' and system='${ST}').exists()).exists()`, s)).toEqual([true]);
    expect(fp(`specialty.coding.where(system='${IHE}' and code='NEUR').exists()`, s)).toEqual([true]);
    expect(fp("actor.where(reference.replaceMatches('/_history/.+','').matches('\\\\bPractitioner-Read-Example$') and display.exists()).exists()", s)).toEqual([true]);
    expect(fp("extension.where(url='http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name').value.exists()", s)).toEqual([true]);
  });

  test('S5-2 Schedule-Search', async () => {
    csInteraction('Schedule', 'search-type');
    csParams('Schedule', [['_id', 'token'], ['active', 'token'], ['service-type', 'token'], ['specialty', 'token'], ['actor', 'reference'], ['_tag', 'token']]);
    const byId = expectAll(await get('Schedule/?_id=Schedule-Read-Example', 'xml'), 'ISiKKalender');
    expect(byId.map((r) => r.id)).toEqual(['Schedule-Read-Example']);
    expectAll(await get(`Schedule/?_tag=${tagQuery}`, 'xml'), 'ISiKKalender', tagged);
    const counted = await get('Schedule/?_count', 'xml');
    expect((counted as Bundle).total).toBeGreaterThan(0);
    expectAll(counted, 'ISiKKalender');
    expectAll(await get('Schedule/?active=true'), 'ISiKKalender', 'active');
    expectAll(await get('Schedule/?service-type=177'), 'ISiKKalender', "serviceType.coding.where(code='177').exists()");
    expectAll(await get(`Schedule/?specialty=${SPECIALTY_OR}`), 'ISiKKalender', SPECIALTY_OR_MATCH);
    expectAll(
      await get('Schedule/?actor=Practitioner/Practitioner-Read-Example', 'xml'),
      'ISiKKalender',
      "actor.where(reference.replaceMatches('/_history/.+','').matches('\\\\bPractitioner-Read-Example$') and display.exists()).exists()",
    );
  });

  test('S5-3 Slot-Read', async () => {
    csInteraction('Slot', 'read');
    const s = await get('Slot/Slot-Read-Example', 'xml');
    expectValid(s, 'ISiKTerminblock');
    expect(fp('status', s)).toEqual(['busy']);
    expect(fp("schedule.reference.replaceMatches('/_history/.+','').matches('\\\\bSchedule-Read-Example$')", s)).toEqual([true]);
    expect(fp("start.toString().contains('2027-01-01')", s)).toEqual([true]);
    expect(fp('end.exists()', s)).toEqual([true]);
  });

  test('S5-4 Slot-Search', async () => {
    csInteraction('Slot', 'search-type');
    csParams('Slot', [['_id', 'token'], ['_count', 'number'], ['schedule', 'reference'], ['status', 'token'], ['start', 'date'], ['_tag', 'token']]);
    const byId = expectAll(await get('Slot/?_id=Slot-Read-Example', 'xml'), 'ISiKTerminblock');
    expect(byId.map((r) => r.id)).toContain('Slot-Read-Example');
    expectAll(await get(`Slot/?_tag=${tagQuery}`, 'xml'), 'ISiKTerminblock', tagged);
    const counted = await get('Slot/?_count', 'xml');
    expect((counted as Bundle).total).toBeGreaterThan(0);
    expectAll(counted, 'ISiKTerminblock');
    const onSchedule = "schedule.reference.replaceMatches('/_history/.+','').matches('\\\\bSchedule-Read-Example$')";
    expectAll(await get('Slot/?schedule=Schedule-Read-Example'), 'ISiKTerminblock', onSchedule);
    expectAll(await get('Slot/?schedule=Schedule-Read-Example&status=busy'), 'ISiKTerminblock', `${onSchedule} and status = 'busy'`);
    expectAll(await get('Slot/?schedule=Schedule-Read-Example&start=2027-01-01'), 'ISiKTerminblock', `${onSchedule} and start.toString().contains('2027-01-01')`);
    const chained = expectAll(await get('Slot/?schedule.actor=Practitioner/Practitioner-Read-Example', 'xml'), 'ISiKTerminblock');
    expect(chained.map((r) => r.id)).toContain('Slot-Read-Example');
  });

  test('S5-5 Appointment-Read', async () => {
    csInteraction('Appointment', 'read');
    const a = await get('Appointment/Appointment-Read-Example', 'xml');
    expectValid(a, 'ISiKTermin');
    expect(fp(tagged, a)).toEqual([true]);
    expect(fp("extension.where(url='http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces').value.reference.exists()", a)).toEqual([true]);
    expect(fp('status', a)).toEqual(['cancelled']);
    expect(fp("cancelationReason.coding.code='pat'", a)).toEqual([true]);
    expect(fp(`serviceType.coding.where(code='177' and system='${ST}').exists()`, a)).toEqual([true]);
    expect(fp(`specialty.coding.where(code='NEUR' and system='${IHE}').exists()`, a)).toEqual([true]);
    expect(
      fp(
        "priority.extension.where(url='https://gematik.de/fhir/isik/StructureDefinition/ISiKTerminPriorityExtension').value.coding.where(code='394848005' and system='http://snomed.info/sct' and version='http://snomed.info/sct/11000274103/version/20251115').exists()",
        a,
      ),
    ).toEqual([true]);
    expect(fp('comment.exists() and patientInstruction.exists()', a)).toEqual([true]);
    expect(fp("start.toString().contains('2027-01-01')", a)).toEqual([true]);
    expect(fp('end.exists()', a)).toEqual([true]);
    expect(fp("slot.reference.replaceMatches('/_history/.+','').matches('\\\\bSlot-Read-Example$')", a)).toEqual([true]);
    expect(fp("participant.actor.where(reference.replaceMatches('/_history/.+','').matches('\\\\bPatient-Read-Example$') and display.exists()).exists()", a)).toEqual([true]);
  });

  test('S5-6 Appointment-Search', async () => {
    csInteraction('Appointment', 'search-type');
    csParams('Appointment', [['_id', 'token'], ['_tag', 'token'], ['_count', 'number'], ['status', 'token'], ['service-type', 'token'], ['specialty', 'token'], ['date', 'date'], ['slot', 'reference'], ['actor', 'reference']]);
    const byId = expectAll(await get('Appointment/?_id=Appointment-Read-Example', 'xml'), 'ISiKTermin');
    expect(byId.map((r) => r.id)).toContain('Appointment-Read-Example');
    expectAll(await get(`Appointment/?_tag=${tagQuery}`), 'ISiKTermin', tagged);
    const counted = await get('Appointment/?_count');
    expect((counted as Bundle).total).toBeGreaterThan(0);
    expectAll(counted, 'ISiKTermin');
    expectAll(await get('Appointment/?status=cancelled'), 'ISiKTermin', "status = 'cancelled'");
    expectAll(await get('Appointment/?service-type=177'), 'ISiKTermin', `serviceType.coding.where(code='177' and system='${ST}').exists()`);
    expectAll(await get(`Appointment/?specialty=${encodeURIComponent(`${IHE}|NEUR`)}`), 'ISiKTermin', `specialty.coding.where(code='NEUR' and system='${IHE}').exists()`);
    const onDay = expectAll(await get('Appointment/?date=2027-01-01', 'xml'), 'ISiKTermin', "start.toString().contains('2027-01-01')");
    expect(onDay.map((r) => r.id)).toContain('Appointment-Read-Example');
    const bySlot = expectAll(await get('Appointment/?slot=Slot-Read-Example', 'xml'), 'ISiKTermin', "slot.reference.replaceMatches('/_history/.+','').matches('\\\\bSlot-Read-Example$')");
    expect(bySlot.map((r) => r.id)).toContain('Appointment-Read-Example');
    expectAll(
      await get('Appointment/?actor=Patient/Patient-Read-Example'),
      'ISiKTermin',
      "participant.actor.where(reference.replaceMatches('/_history/.+','').matches('\\\\bPatient-Read-Example$') and display.exists()).exists()",
    );
  });

  test('S5-7a/S5-8 CapabilityStatement: $book on Appointment', () => {
    csHas("where(type='Appointment' and operation.where(name='book').exists())");
  });

  test('S5-9 HealthcareService-Read', async () => {
    csInteraction('HealthcareService', 'read');
    const h = await get('HealthcareService/HealthcareService-Read-Example', 'xml');
    expectValid(h, 'ISiKMedizinischeBehandlungseinheit');
    expect(fp('active', h)).toEqual([true]);
    expect(fp(`type.coding.where(code='177' and system='${ST}').exists()`, h)).toEqual([true]);
    expect(fp(`specialty.coding.where(code='NEUR' and system='${IHE}').exists()`, h)).toEqual([true]);
    expect(fp('name', h)).toEqual(['General consultation office of the Neurology department']);
  });

  test('S5-10 HealthcareService-Search', async () => {
    const profile = 'ISiKMedizinischeBehandlungseinheit';
    csInteraction('HealthcareService', 'search-type');
    csParams('HealthcareService', [['_id', 'token'], ['_count', 'number'], ['active', 'token'], ['service-type', 'token'], ['specialty', 'token'], ['name', 'string'], ['_tag', 'token']]);
    const byId = expectAll(await get('HealthcareService/?_id=HealthcareService-Read-Example', 'xml'), profile);
    expect(byId.map((r) => r.id)).toEqual(['HealthcareService-Read-Example']);
    expectAll(await get(`HealthcareService/?_tag=${tagQuery}`), profile, tagged);
    const counted = await get('HealthcareService/?_count');
    expect((counted as Bundle).total).toBeGreaterThan(0);
    expectAll(counted, profile);
    expectAll(await get('HealthcareService/?active=true'), profile, 'active');
    expectAll(await get('HealthcareService/?service-type=177'), profile, "type.coding.where(code='177').exists()");
    expectAll(await get(`HealthcareService/?specialty=${SPECIALTY_OR}`), profile, SPECIALTY_OR_MATCH);
    expectAll(
      await get('HealthcareService/?name=General%20consultation%20office%20of%20the%20Neurology%20department', 'xml'),
      profile,
      "name.contains('General consultation office of the Neurology department')",
    );
  });

  test('S5-11 Encounter-Appointment-Read', async () => {
    csInteraction('Encounter', 'read');
    const e = await get('Encounter/Encounter-Read-Planned-Example', 'xml');
    expectValid(e, 'ISiKKontaktGesundheitseinrichtung');
    expect(fp('status', e)).toEqual(['planned']);
    expect(fp("identifier.where(system='https://test.krankenhaus.de/fhir/sid/fallnr' and value='0123456789').exists()", e)).toEqual([true]);
    expect(fp("class.where(code='IMP' and system='http://terminology.hl7.org/CodeSystem/v3-ActCode').exists()", e)).toEqual([true]);
    expect(fp("type.coding.where(code='normalstationaer' and system='http://fhir.de/CodeSystem/kontaktart-de').exists()", e)).toEqual([true]);
    expect(fp("serviceType.coding.where(code='1500' and system='http://fhir.de/CodeSystem/dkgev/Fachabteilungsschluessel').exists()", e)).toEqual([true]);
    expect(fp("subject.reference.replaceMatches('/_history/.+','').matches('\\\\bPatient-Read-Example$')", e)).toEqual([true]);
    expect(fp("hospitalization.admitSource.coding.where(code='E' and system='http://fhir.de/CodeSystem/dgkev/Aufnahmeanlass').exists()", e)).toEqual([true]);
    expect(fp("serviceProvider.display = 'Hospital' and serviceProvider.identifier.value = '123456789'", e)).toEqual([true]);
    expect(fp("appointment.reference.replaceMatches('/_history/.+','').matches('\\\\bAppointment-Read-Example$')", e)).toEqual([true]);
    expect(fp('period.exists()', e)).toEqual([false]);
  });

  test('CapabilityStatement: Encounter search as ISiK demands (scheduling.md 1.7)', () => {
    csInteraction('Encounter', 'search-type');
    csParams('Encounter', [['_id', 'token'], ['_count', 'number'], ['identifier', 'token'], ['status', 'token'], ['class', 'token'], ['type', 'token'], ['patient', 'reference'], ['account', 'reference'], ['date', 'date'], ['date-start', 'date'], ['end-date', 'date']]);
    csHas("where(type='Encounter' and searchInclude contains 'Encounter:patient')");
  });

  test('CodeSystem discovery by context-type-value (ISiK Terminplanung 6.0.0)', async () => {
    const q = encodeURIComponent('https://gematik.de/fhir/isik/CodeSystem/ContextType|ResourceUsage$http://hl7.org/fhir/resource-types|HealthcareService');
    const found = entries(await get(`CodeSystem?context-type-value=${q}`));
    expect(found.length).toBeGreaterThan(0);
    for (const r of found) expect(r.resourceType).toBe('CodeSystem');
  });
});
