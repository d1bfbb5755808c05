import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseForm } from '../../src/client/ui/calendar-plan';
import { FhirError } from '../../src/client/ui/fhir';
import { codingLabel, conceptLabel } from '../../src/client/ui/labels';
import { machineTimeZone } from '../../src/client/ui/time-zone';

/** The practice page's server-side parts without a browser: its time zone, the names of codes, the service type of the form. */

describe("the page's default time zone is the machine's, whichever form TZ takes", () => {
  let dir: string;
  let berlinLink: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'practice-zone-'));
    // A system zone file as Debian has it: /etc/localtime linking into a zoneinfo directory.
    fs.mkdirSync(path.join(dir, 'zoneinfo', 'Europe'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'zoneinfo', 'Europe', 'Berlin'), 'TZif');
    berlinLink = path.join(dir, 'localtime');
    fs.symlinkSync(path.join(dir, 'zoneinfo', 'Europe', 'Berlin'), berlinLink);
    fs.writeFileSync(path.join(dir, 'timezone'), 'Europe/Vienna\n');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test.each([
    ['a zone name', 'Europe/Berlin', 'Europe/Berlin'],
    ['a zone name after a colon', ':America/New_York', 'America/New_York'],
    ['a POSIX rule named after a tz zone (Intl alone says UTC)', 'CET-1CEST,M3.5.0,M10.5.0/3', 'CET'],
    ['a POSIX rule without daylight saving time', 'JST-9', 'Etc/GMT-9'],
    ['a zone file (Intl alone says no zone)', () => path.join(dir, 'zoneinfo', 'Europe', 'Berlin'), 'Europe/Berlin'],
    ['a link to a zone file after a colon', () => `:${berlinLink}`, 'Europe/Berlin'],
  ])('TZ as %s', (_what, tz, zone) => {
    expect(machineTimeZone({ tz: typeof tz === 'function' ? tz() : tz, resolved: undefined })).toBe(zone);
  });

  test('without TZ: what Intl resolves, else the system zone link, else its name file, else UTC', () => {
    expect(machineTimeZone({ resolved: 'Asia/Tokyo', localtime: berlinLink })).toBe('Asia/Tokyo');
    expect(machineTimeZone({ resolved: undefined, localtime: berlinLink })).toBe('Europe/Berlin');
    expect(machineTimeZone({ resolved: undefined, localtime: path.join(dir, 'missing'), timezoneFile: path.join(dir, 'timezone') })).toBe('Europe/Vienna');
    expect(machineTimeZone({ tz: 'no such zone', resolved: undefined, localtime: path.join(dir, 'missing') })).toBe('UTC');
  });
});

describe('codes read as names', () => {
  const ST = 'http://terminology.hl7.org/CodeSystem/service-type';
  test.each([
    ['the text first (ISiK: free text suffices)', { text: 'Hausärztliche Sprechstunde', coding: [{ system: ST, code: '124', display: 'General Practice' }] }, 'Hausärztliche Sprechstunde'],
    ['a known code in German', { coding: [{ system: ST, code: '177', display: 'Neurology' }] }, 'Neurologie'],
    ['an unknown code by its display, not its code', { coding: [{ system: 'http://example.org/leistungen', code: 'x-1', display: 'Impfsprechstunde' }] }, 'Impfsprechstunde'],
    ['a code without display by its code', { coding: [{ system: 'http://example.org/leistungen', code: 'x-1' }] }, 'x-1'],
  ])('%s', (_what, concept, label) => {
    expect(conceptLabel(concept)).toBe(label);
  });
  test('a coding alone', () => {
    expect(codingLabel({ system: ST, code: '124', display: 'General Practice' })).toBe('Allgemeinmedizin');
    expect(codingLabel({ system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR', display: 'Neurologie' })).toBe('Neurologie');
  });
});

describe("the new calendar's service type: a code of the repository or free text", () => {
  const form = (serviceType: unknown) => ({
    name: 'Sprechstunde',
    actor: 'Practitioner/p1',
    serviceType,
    specialty: { system: 'http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', code: 'NEUR' },
    hours: { 1: [['08:00', '12:00']] },
    slotMinutes: 15,
    from: '2031-03-03',
    to: '2031-03-09',
  });
  const refusal = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      if (err instanceof FhirError) return { status: err.status, field: err.outcome.issue[0].expression?.[0], reason: err.reason };
      throw err;
    }
    throw new Error('not refused');
  };

  test('free text alone', () => {
    expect(parseForm(form({ text: '  Akutsprechstunde ' })).serviceType).toEqual({ text: 'Akutsprechstunde' });
  });
  test('a concept in use, its codings and text kept', () => {
    const concept = { text: 'Neurologische Sprechstunde', coding: [{ system: 'http://terminology.hl7.org/CodeSystem/service-type', code: '177', display: 'Neurology' }] };
    expect(parseForm(form(concept)).serviceType).toEqual(concept);
  });
  test.each([
    ['neither code nor text', { text: ' ' }],
    ['a coding without code', { coding: [{ system: 'http://x' }] }],
    ['codings that are no list', { coding: { system: 'http://x', code: 'a' } }],
    ['text of 201 characters', { text: 'x'.repeat(201) }],
  ])('refused with 400 naming the field: %s', (_what, serviceType) => {
    expect(refusal(() => parseForm(form(serviceType)))).toEqual({ status: 400, field: 'serviceType', reason: { code: 'form-field', field: 'serviceType' } });
  });
});
