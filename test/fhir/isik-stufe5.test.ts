import fs from 'node:fs';
import request from 'supertest';
import type { Express } from 'express';
import type { Bundle, Resource } from '@medplum/fhirtypes';
import { createApp } from '../../src/app';
import type { AppContext } from '../../src/context';
import { importResources } from '../../src/fhir/import';
import { evalFhirPath } from '../../src/fhir/medplum';
import { fromXml } from '../../src/fhir/formats';
import { projectPath } from '../../src/paths';
import { createTestContext } from '../helpers/context';

/**
 * The read and search scenarios of the gematik ISiK Stufe 5 Terminplanung suite
 * (reference/scheduling.md 2.1: S5-1 to S5-6, S5-9, S5-10, S5-11) against our fixture Bundle,
 * with the suite's URL shapes (`Type/?param`), XML where the suite asks for XML, and its
 * FHIRPath checks.
 */
const TAG = 'http://fhir.de/CodeSystem/common-meta-tag-de';

describe('ISiK Stufe 5 Terminplanung read and search scenarios', () => {
  let ctx: AppContext;
  let app: Express;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = createApp(ctx);
    await importResources(ctx, JSON.parse(fs.readFileSync(projectPath('fixtures', 'isik-stufe5.json'), 'utf8')) as Bundle);
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

  test('S5-1 Schedule-Read', async () => {
    csHas("where(type='Schedule' and interaction.where(code='read').exists())");
    const s = await get('Schedule/Schedule-Read-Example', 'xml');
    expect(s.id).toBe('Schedule-Read-Example');
    expect(fp('active', s)).toEqual([true]);
    expect(fp("serviceType.where(text.exists() and coding.where(code='177' and system='http://terminology.hl7.org/CodeSystem/service-type').exists()).exists()", s)).toEqual([true]);
    expect(fp("specialty.coding.where(system='http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen' and code='NEUR').exists()", s)).toEqual([true]);
    expect(fp("actor.where(reference.replaceMatches('/_history/.+','').matches('\\\\bPractitioner-Read-Example$') and display.exists()).exists()", s)).toEqual([true]);
    expect(fp("extension.where(url='http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name').value.exists()", s)).toEqual([true]);
  });

  test('S5-2 Schedule-Search', async () => {
    csHas("where(type='Schedule' and interaction.where(code='search-type').exists())");
    for (const [name, type] of [['_id', 'token'], ['active', 'token'], ['service-type', 'token'], ['specialty', 'token'], ['actor', 'reference'], ['_tag', 'token']]) {
      csHas(`where(type='Schedule' and searchParam.where(name='${name}' and type='${type}').exists())`);
    }
    const byId = entries(await get('Schedule/?_id=Schedule-Read-Example', 'xml'));
    expect(byId.map((r) => r.id)).toEqual(['Schedule-Read-Example']);
    const tagged = entries(await get(`Schedule/?_tag=${encodeURIComponent(`${TAG}|external`)}`, 'xml'));
    expect(tagged.length).toBeGreaterThan(0);
    for (const r of tagged) expect(fp(`meta.tag.where(system='${TAG}').all(code='external')`, r)).toEqual([true]);
    const counted = await get('Schedule/?_count', 'xml');
    expect((counted as Bundle).total).toBeGreaterThan(0);
    expect(entries(counted).length).toBeGreaterThan(0);
    const active = entries(await get('Schedule/?active=true'));
    expect(active.length).toBeGreaterThan(0);
    for (const r of active) expect(fp('active', r)).toEqual([true]);
    const byCode = entries(await get('Schedule/?service-type=177'));
    expect(byCode.length).toBeGreaterThan(0);
    for (const r of byCode) expect(fp("serviceType.coding.where(code='177').exists()", r)).toEqual([true]);
    const spec = entries(await get('Schedule/?specialty=urn%3Aoid%3A1.2.276.0.76.5.114%7C142%2Chttp%3A%2F%2Fihe-d.de%2FCodeSystems%2FAerztlicheFachrichtungen%7CNEUR'));
    expect(spec.length).toBeGreaterThan(0);
    const byActor = entries(await get('Schedule/?actor=Practitioner/Practitioner-Read-Example', 'xml'));
    expect(byActor.length).toBeGreaterThan(0);
    for (const r of byActor) expect(fp("actor.where(reference.contains('Practitioner-Read-Example') and display.exists()).exists()", r)).toEqual([true]);
  });

  test('S5-3 Slot-Read', async () => {
    csHas("where(type='Slot' and interaction.where(code='read').exists())");
    const s = await get('Slot/Slot-Read-Example', 'xml');
    expect(fp('status', s)).toEqual(['busy']);
    expect(fp("schedule.reference.replaceMatches('/_history/.+','').matches('\\\\bSchedule-Read-Example$')", s)).toEqual([true]);
    expect(fp("start.toString().contains('2027-01-01')", s)).toEqual([true]);
    expect(fp('end.exists()', s)).toEqual([true]);
  });

  test('S5-4 Slot-Search', async () => {
    for (const [name, type] of [['_id', 'token'], ['_count', 'number'], ['schedule', 'reference'], ['status', 'token'], ['start', 'date']]) {
      csHas(`where(type='Slot' and searchParam.where(name='${name}' and type='${type}').exists())`);
    }
    expect(entries(await get('Slot/?_id=Slot-Read-Example', 'xml')).map((r) => r.id)).toContain('Slot-Read-Example');
    expect((await get('Slot/?_count', 'xml') as Bundle).total).toBeGreaterThan(0);
    const bySchedule = entries(await get('Slot/?schedule=Schedule-Read-Example'));
    expect(bySchedule.length).toBeGreaterThan(0);
    for (const r of bySchedule) expect(fp("schedule.reference.contains('Schedule-Read-Example')", r)).toEqual([true]);
    const busy = entries(await get('Slot/?schedule=Schedule-Read-Example&status=busy'));
    expect(busy.length).toBeGreaterThan(0);
    for (const r of busy) expect(r).toMatchObject({ status: 'busy' });
    const onDay = entries(await get('Slot/?schedule=Schedule-Read-Example&start=2027-01-01'));
    expect(onDay.length).toBeGreaterThan(0);
    for (const r of onDay) expect(fp("start.toString().contains('2027-01-01')", r)).toEqual([true]);
    const chained = entries(await get('Slot/?schedule.actor=Practitioner/Practitioner-Read-Example', 'xml'));
    expect(chained.map((r) => r.id)).toContain('Slot-Read-Example');
  });

  test('S5-5 Appointment-Read', async () => {
    const a = await get('Appointment/Appointment-Read-Example', 'xml');
    expect(fp(`meta.tag.where(system='${TAG}').all(code='external')`, a)).toEqual([true]);
    expect(fp("extension.where(url='http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces').value.reference.exists()", a)).toEqual([true]);
    expect(fp('status', a)).toEqual(['cancelled']);
    expect(fp("cancelationReason.coding.code='pat'", a)).toEqual([true]);
    expect(
      fp(
        "priority.extension.where(url='https://gematik.de/fhir/isik/StructureDefinition/ISiKTerminPriorityExtension').value.coding.where(code='394848005' and system='http://snomed.info/sct' and version='http://snomed.info/sct/11000274103/version/20251115').exists()",
        a,
      ),
    ).toEqual([true]);
    expect(fp('comment.exists() and patientInstruction.exists()', a)).toEqual([true]);
    expect(fp("slot.reference.replaceMatches('/_history/.+','').matches('\\\\bSlot-Read-Example$')", a)).toEqual([true]);
    expect(fp("participant.actor.where(reference.contains('Patient-Read-Example') and display.exists()).exists()", a)).toEqual([true]);
  });

  test('S5-6 Appointment-Search', async () => {
    for (const [name, type] of [['_id', 'token'], ['_tag', 'token'], ['_count', 'number'], ['status', 'token'], ['service-type', 'token'], ['specialty', 'token'], ['date', 'date'], ['slot', 'reference'], ['actor', 'reference']]) {
      csHas(`where(type='Appointment' and searchParam.where(name='${name}' and type='${type}').exists())`);
    }
    expect(entries(await get('Appointment/?_id=Appointment-Read-Example', 'xml')).map((r) => r.id)).toContain('Appointment-Read-Example');
    expect(entries(await get(`Appointment/?_tag=${encodeURIComponent(`${TAG}|external`)}`)).length).toBeGreaterThan(0);
    expect((await get('Appointment/?_count') as Bundle).total).toBeGreaterThan(0);
    const cancelled = entries(await get('Appointment/?status=cancelled'));
    expect(cancelled.length).toBeGreaterThan(0);
    for (const r of cancelled) expect(r).toMatchObject({ status: 'cancelled' });
    for (const r of entries(await get('Appointment/?service-type=177'))) {
      expect(fp("serviceType.coding.where(code='177' and system='http://terminology.hl7.org/CodeSystem/service-type').exists()", r)).toEqual([true]);
    }
    expect(entries(await get('Appointment/?specialty=http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen%7CNEUR')).length).toBeGreaterThan(0);
    const onDay = entries(await get('Appointment/?date=2027-01-01', 'xml'));
    expect(onDay.map((r) => r.id)).toContain('Appointment-Read-Example');
    for (const r of onDay) expect(fp("start.toString().contains('2027-01-01')", r)).toEqual([true]);
    expect(entries(await get('Appointment/?slot=Slot-Read-Example', 'xml')).map((r) => r.id)).toContain('Appointment-Read-Example');
    const byPatient = entries(await get('Appointment/?actor=Patient/Patient-Read-Example'));
    expect(byPatient.length).toBeGreaterThan(0);
    for (const r of byPatient) expect(fp("participant.actor.where(reference.contains('Patient-Read-Example') and display.exists()).exists()", r)).toEqual([true]);
  });

  test('S5-9 HealthcareService-Read', async () => {
    const h = await get('HealthcareService/HealthcareService-Read-Example', 'xml');
    expect(fp('active', h)).toEqual([true]);
    expect(fp("type.coding.where(code='177' and system='http://terminology.hl7.org/CodeSystem/service-type').exists()", h)).toEqual([true]);
    expect(fp("specialty.coding.where(code='NEUR').exists()", h)).toEqual([true]);
    expect(fp('name', h)).toEqual(['General consultation office of the Neurology department']);
  });

  test('S5-10 HealthcareService-Search', async () => {
    csHas("where(type='HealthcareService' and searchParam.where(name='name' and type='string').exists())");
    expect(entries(await get('HealthcareService/?_id=HealthcareService-Read-Example', 'xml')).length).toBe(1);
    for (const r of entries(await get('HealthcareService/?active=true'))) expect(fp('active', r)).toEqual([true]);
    expect(entries(await get('HealthcareService/?service-type=177')).length).toBeGreaterThan(0);
    expect(entries(await get('HealthcareService/?specialty=urn%3Aoid%3A1.2.276.0.76.5.114%7C142%2Chttp%3A%2F%2Fihe-d.de%2FCodeSystems%2FAerztlicheFachrichtungen%7CNEUR')).length).toBeGreaterThan(0);
    const byName = entries(await get('HealthcareService/?name=General%20consultation%20office%20of%20the%20Neurology%20department', 'xml'));
    expect(byName.length).toBeGreaterThan(0);
    for (const r of byName) expect(fp("name.contains('General consultation office of the Neurology department')", r)).toEqual([true]);
  });

  test('S5-11 Encounter-Appointment-Read', async () => {
    const e = await get('Encounter/Encounter-Read-Planned-Example', 'xml');
    expect(fp('status', e)).toEqual(['planned']);
    expect(fp("appointment.reference.contains('Appointment-Read-Example')", e)).toEqual([true]);
    expect(fp('period.exists()', e)).toEqual([false]);
  });

  test('CodeSystem discovery by context-type-value (seed 001 section 4)', async () => {
    const q = encodeURIComponent('https://gematik.de/fhir/isik/CodeSystem/ContextType|ResourceUsage$http://hl7.org/fhir/resource-types|HealthcareService');
    const found = entries(await get(`CodeSystem?context-type-value=${q}`));
    expect(found.length).toBeGreaterThan(0);
    for (const r of found) expect(r.resourceType).toBe('CodeSystem');
  });
});
