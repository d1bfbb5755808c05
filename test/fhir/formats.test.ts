import type { Resource } from '@medplum/fhirtypes';
import {
  FHIR_JSON,
  FHIR_XML,
  FhirJsonError,
  FhirXmlError,
  UnsupportedMediaType,
  XmlSerializationError,
  fromXml,
  negotiateFormat,
  MAX_DEPTH,
  parseBody,
  parseJson,
  pathSegments,
  toXml,
} from '../../src/model/formats';

const PRIORITY_EXTENSION = 'https://gematik.de/fhir/isik/StructureDefinition/ISiKTerminPriorityExtension';
const XHTML = 'http://www.w3.org/1999/xhtml';

function codeable(system: string, code: string): { coding: { system: string; code: string }[] } {
  return { coding: [{ system, code }] };
}

// scheduling.md §4 ISiKTerminExample, with the fields the ISiK profile marks must-support.
const appointment = {
  resourceType: 'Appointment',
  id: 'ISiKTerminExample',
  meta: {
    versionId: '3',
    lastUpdated: '2026-11-21T10:00:00.000Z',
    tag: [{ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' }],
    profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKTermin'],
  },
  extension: [
    {
      url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.replaces',
      valueReference: { reference: 'Appointment/Example' },
    },
  ],
  status: 'proposed',
  serviceType: [{ ...codeable('http://terminology.hl7.org/CodeSystem/service-type', '124'), text: 'Beratung' }],
  specialty: [codeable('http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', 'ALLG')],
  _priority: {
    extension: [{ url: PRIORITY_EXTENSION, valueCodeableConcept: codeable('http://snomed.info/sct', '25876001') }],
  },
  start: '2022-12-10T09:00:00Z',
  end: '2022-12-10T11:00:00Z',
  minutesDuration: 120,
  slot: [{ reference: 'Slot/ISiKTerminblockExample' }],
  comment: 'Dies ist ein "Test" <Kommentar> & mehr\nzweite Zeile',
  patientInstruction: 'Bitte nüchtern erscheinen',
  participant: [
    { actor: { reference: 'Patient/ISiKPatientTest', display: 'Test Patient' }, status: 'accepted' },
    { actor: { reference: 'Practitioner/example', display: 'Dr. Fleming' }, required: 'required', status: 'accepted' },
  ],
} as Resource;

const schedule = {
  resourceType: 'Schedule',
  id: 'ISiKKalenderExample',
  meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKKalender'] },
  extension: [
    { url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'Sprechstunde Neurologie' },
  ],
  active: true,
  serviceType: [{ ...codeable('http://terminology.hl7.org/CodeSystem/service-type', '124'), text: 'Sprechstunde' }],
  specialty: [codeable('http://ihe-d.de/CodeSystems/AerztlicheFachrichtungen', 'ALLG')],
  actor: [{ reference: 'Practitioner/example', display: 'Dr. Fleming' }],
} as Resource;

const slot = {
  resourceType: 'Slot',
  id: 'ISiKTerminblockExample',
  meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKTerminblock'] },
  schedule: { reference: 'Schedule/ISiKKalenderExample' },
  status: 'busy',
  start: '2022-12-10T09:00:00Z',
  end: '2022-12-10T11:00:00Z',
  overbooked: false,
} as Resource;

const patient = {
  resourceType: 'Patient',
  id: 'DorisZiel',
  text: {
    status: 'generated',
    div: `<div xmlns="${XHTML}"><p class="name">Doris <b>Ziel</b> &amp; Familie &lt;3</p><br/><a href="http://x/?a=1&amp;b=2">Akte</a></div>`,
  },
  identifier: [
    {
      type: codeable('http://terminology.hl7.org/CodeSystem/v2-0203', 'MR'),
      system: 'https://fhir.krankenhaus.example/sid/PID',
      value: '123456',
    },
  ],
  active: true,
  name: [
    {
      use: 'official',
      family: 'Ziel',
      given: ['Doris', 'Maria'],
      _given: [null, { id: 'g2', extension: [{ url: 'http://example.org/rufname', valueBoolean: true }] }],
    },
  ],
  gender: 'female',
  birthDate: '1964-08-12',
  _birthDate: {
    extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/patient-birthTime', valueDateTime: '1964-08-12T06:30:00+01:00' }],
  },
  contained: [{ resourceType: 'Organization', id: 'org', name: 'Klinik' }],
  managingOrganization: { reference: '#org' },
} as unknown as Resource; // `_given: [null, …]` is valid FHIR JSON the fhirtypes cannot express

const searchset = {
  resourceType: 'Bundle',
  id: 'b1',
  type: 'searchset',
  total: 2,
  link: [{ relation: 'self', url: 'http://fhirserver/Slot/?schedule=Schedule-Read-Example&_count=2' }],
  entry: [
    { fullUrl: 'http://fhirserver/Slot/a', resource: { ...slot, id: 'a' }, search: { mode: 'match', score: 0.75 } },
    { fullUrl: 'http://fhirserver/Schedule/ISiKKalenderExample', resource: schedule, search: { mode: 'include' } },
  ],
} as Resource;

const outcome = {
  resourceType: 'OperationOutcome',
  issue: [
    {
      severity: 'error',
      code: 'processing',
      details: { text: 'Slot ist bereits belegt' },
      diagnostics: 'Slot/Busy-Block overlaps',
      expression: ['Appointment.slot[0]'],
    },
    { severity: 'information', code: 'informational', diagnostics: 'Zweiter Hinweis' },
  ],
} as Resource;

const parameters = {
  resourceType: 'Parameters',
  parameter: [
    {
      name: 'appt-resource',
      resource: {
        resourceType: 'Appointment',
        status: 'proposed',
        start: '2027-01-31T11:05:00Z',
        end: '2027-01-31T11:55:00Z',
        participant: [{ actor: { reference: 'Patient/Patient-Read-Example' }, status: 'accepted' }],
      },
    },
    { name: 'cancelled-appt-id', valueUri: 'Appointment/old' },
    {
      name: 'notification-event',
      part: [
        { name: 'event-number', valueString: '1' },
        { name: 'timestamp', valueInstant: '2026-03-12T17:05:00+01:00' },
        { name: 'focus', valueReference: { reference: 'Appointment/123' } },
        { name: 'nested', part: [{ name: 'deep', valueBoolean: false }] },
      ],
    },
    { name: 'ratio', valueDecimal: 1.25 },
    { name: 'count', valueInteger: -3 },
    { name: 'limit', valueUnsignedInt: 0 },
  ],
} as Resource;

describe('toXml / fromXml round trip', () => {
  test.each([
    ['an ISiK Appointment with _priority extension', appointment],
    ['a Schedule with the name extension', schedule],
    ['a Slot', slot],
    ['a Patient with narrative, primitive extensions and a contained resource', patient],
    ['a searchset Bundle with total and two entries', searchset],
    ['an OperationOutcome', outcome],
    ['a Parameters with nested resource and part', parameters],
  ])('%s survives JSON -> XML -> JSON unchanged', (_name, resource) => {
    const xml = toXml(resource);
    expect(xml.startsWith('<?xml version="1.0" encoding="UTF-8"?>')).toBe(true);
    expect(fromXml(xml)).toEqual(resource);
  });

  test('an Appointment serializes in R4 element order with primitive extensions merged', () => {
    const xml = toXml(appointment);
    expect(xml).toContain('<Appointment xmlns="http://hl7.org/fhir"><id value="ISiKTerminExample"/><meta>');
    expect(xml).toContain(
      `<priority><extension url="${PRIORITY_EXTENSION}"><valueCodeableConcept><coding><system value="http://snomed.info/sct"/><code value="25876001"/></coding></valueCodeableConcept></extension></priority>`,
    );
    const order = ['<meta>', '<extension ', '<status ', '<serviceType>', '<specialty>', '<priority>', '<start ', '<end ', '<minutesDuration ', '<slot>', '<comment ', '<patientInstruction ', '<participant>'];
    const positions = order.map((tag) => xml.indexOf(tag));
    expect(positions.every((p) => p > 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(xml).toContain('<comment value="Dies ist ein &quot;Test&quot; &lt;Kommentar&gt; &amp; mehr&#10;zweite Zeile"/>');
  });

  test('Bundle entries and contained resources are wrapped in their type element; div is inline', () => {
    expect(toXml(searchset)).toContain('<resource><Slot><id value="a"/>');
    expect(toXml(searchset)).toContain('<total value="2"/>');
    const xml = toXml(patient);
    expect(xml).toContain('<contained><Organization><id value="org"/><name value="Klinik"/></Organization></contained>');
    expect(xml).toContain(`<text><status value="generated"/><div xmlns="${XHTML}"><p class="name">Doris <b>Ziel</b>`);
    expect(xml).toContain('<given value="Doris"/><given id="g2" value="Maria"><extension url="http://example.org/rufname"><valueBoolean value="true"/></extension></given>');
  });

  test('narrative keeps empty non-void elements open and closes void ones', () => {
    const div = `<div xmlns="${XHTML}"><table><tr><td class="a"></td><td>x<br/></td></tr></table><img src="a.png"/></div>`;
    const withDiv = { resourceType: 'Basic', code: { text: 'n' }, text: { status: 'generated', div } } as Resource;
    expect(toXml(withDiv)).toContain(div);
    expect(fromXml(toXml(withDiv))).toEqual(withDiv);
  });

  test('a div without a namespace is declared XHTML; entities in it must be XML ones', () => {
    const withDiv = (div: string): Resource => ({ resourceType: 'Basic', code: { text: 'n' }, text: { status: 'generated', div } }) as Resource;
    expect(fromXml(toXml(withDiv('<div>a &lt; b</div>')))).toEqual(withDiv(`<div xmlns="${XHTML}">a &lt; b</div>`));
    expect(() => toXml(withDiv('<div>&nbsp;</div>'))).toThrow(XmlSerializationError);
    expect(() => toXml(withDiv('<div><p></div>'))).toThrow(XmlSerializationError);
    expect(() => toXml(withDiv('<p>not a div</p>'))).toThrow(XmlSerializationError);
  });

  test('toXml refuses a resource that is not R4 (a server bug, not a client error)', () => {
    expect(() => toXml({ resourceType: 'Slot', status: 'free', bogus: 1 } as unknown as Resource)).toThrow(XmlSerializationError);
    expect(() => toXml({ resourceType: 'Slot', overbooked: 'yes' } as unknown as Resource)).toThrow(XmlSerializationError);
    expect(() => toXml({ resourceType: 'Nope' } as unknown as Resource)).toThrow(XmlSerializationError);
  });
});

describe('fromXml', () => {
  test('a hand-written XML sample parses to the expected JSON', () => {
    const xml = `<?xml version="1.0" encoding="UTF-8"?>
<!-- written by hand, with a prefix, comments, entities and whitespace -->
<f:Appointment xmlns:f="http://hl7.org/fhir" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
    xsi:schemaLocation="http://hl7.org/fhir fhir-all.xsd">
  <f:id value="Appointment-Read-Example"/>
  <f:meta>
    <f:tag><f:system value="http://fhir.de/CodeSystem/common-meta-tag-de"/><f:code value="external"/></f:tag>
  </f:meta>
  <f:text>
    <f:status value="generated"/>
    <div xmlns="http://www.w3.org/1999/xhtml">Termin am <b>1.&#160;Januar</b> &#x2013; <![CDATA[<bitte>]]></div>
  </f:text>
  <f:status value="booked"/>
  <f:priority id="p1" value="5">
    <f:extension url="${PRIORITY_EXTENSION}">
      <f:valueCodeableConcept><f:coding><f:system value="http://snomed.info/sct"/><f:code value="394848005"/></f:coding></f:valueCodeableConcept>
    </f:extension>
  </f:priority>
  <f:minutesDuration value="30"/>
  <f:slot><f:reference value="Slot/Slot-Read-Example"/></f:slot>
  <f:comment value="Raum &quot;A&quot; &amp; B&#10;2. Stock"/>
  <f:participant>
    <f:actor><f:reference value="Patient/Patient-Read-Example"/><f:display value="Test Patient"/></f:actor>
    <f:status value="accepted"/>
  </f:participant>
</f:Appointment>`;
    expect(fromXml(xml)).toEqual({
      resourceType: 'Appointment',
      id: 'Appointment-Read-Example',
      meta: { tag: [{ system: 'http://fhir.de/CodeSystem/common-meta-tag-de', code: 'external' }] },
      text: {
        status: 'generated',
        div: `<div xmlns="${XHTML}">Termin am <b>1.\u00a0Januar</b> \u2013 &lt;bitte&gt;</div>`,
      },
      status: 'booked',
      priority: 5,
      _priority: {
        id: 'p1',
        extension: [{ url: PRIORITY_EXTENSION, valueCodeableConcept: codeable('http://snomed.info/sct', '394848005') }],
      },
      minutesDuration: 30,
      slot: [{ reference: 'Slot/Slot-Read-Example' }],
      comment: 'Raum "A" & B\n2. Stock',
      participant: [{ actor: { reference: 'Patient/Patient-Read-Example', display: 'Test Patient' }, status: 'accepted' }],
    });
  });

  test('numbers and booleans become JSON types, decimals keep their value', () => {
    const xml = `<Bundle xmlns="http://hl7.org/fhir"><type value="searchset"/><total value="12"/>
      <entry><search><score value="1.50"/></search></entry></Bundle>`;
    expect(fromXml(xml)).toEqual({ resourceType: 'Bundle', type: 'searchset', total: 12, entry: [{ search: { score: 1.5 } }] });
  });

  const billionLaughs = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<Patient xmlns="http://hl7.org/fhir"><id value="&lol9;"/></Patient>`;
  const xxe = `<?xml version="1.0"?><!DOCTYPE p [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<Patient xmlns="http://hl7.org/fhir"><id value="&x;"/></Patient>`;

  test.each([
    ['malformed XML (unclosed element)', '<Patient xmlns="http://hl7.org/fhir"><id value="x"></Patient>', /Malformed XML/],
    ['not XML at all', '{"resourceType":"Patient"}', /Malformed XML/],
    ['an empty document', '', /Malformed XML/],
    ['two root elements', '<Patient xmlns="http://hl7.org/fhir"/><Patient xmlns="http://hl7.org/fhir"/>', /exactly one root/],
    ['a wrong namespace', '<Patient xmlns="http://example.org/fhir"><id value="x"/></Patient>', /FHIR namespace/],
    ['no namespace', '<Patient><id value="x"/></Patient>', /FHIR namespace/],
    ['an unknown root resource type', '<Foo xmlns="http://hl7.org/fhir"><id value="x"/></Foo>', /Unknown resource type 'Foo'/],
    ['an abstract root type', '<DomainResource xmlns="http://hl7.org/fhir"/>', /Unknown resource type/],
    ['an XML bomb (entity expansion)', billionLaughs, /DOCTYPE/],
    ['an external entity (XXE)', xxe, /DOCTYPE/],
    ['an undeclared entity', '<Patient xmlns="http://hl7.org/fhir"><id value="&nbsp;"/></Patient>', /Unknown entity &nbsp;/],
    ['an unknown element', '<Patient xmlns="http://hl7.org/fhir"><bogus value="1"/></Patient>', /Unknown element 'bogus'/],
    ['a repeated singleton', '<Patient xmlns="http://hl7.org/fhir"><active value="true"/><active value="false"/></Patient>', /must not repeat/],
    ['a wrongly typed boolean', '<Patient xmlns="http://hl7.org/fhir"><active value="yes"/></Patient>', /Invalid boolean/],
    ['a decimal in an integer', '<Bundle xmlns="http://hl7.org/fhir"><total value="1.5"/></Bundle>', /Invalid unsignedInt/],
    ['an integer beyond 32 bits', '<Bundle xmlns="http://hl7.org/fhir"><total value="4294967296"/></Bundle>', /Invalid unsignedInt/],
    ['a negative unsignedInt', '<Bundle xmlns="http://hl7.org/fhir"><total value="-1"/></Bundle>', /Invalid unsignedInt/],
    ['text where elements belong', '<Patient xmlns="http://hl7.org/fhir">hello</Patient>', /Unexpected text/],
    ['an empty value attribute', '<Patient xmlns="http://hl7.org/fhir"><gender value=""/></Patient>', /Empty attribute/],
    ['a primitive with neither value nor extension', '<Patient xmlns="http://hl7.org/fhir"><active/></Patient>', /neither value nor extension/],
    ['a prototype-polluting element name', '<Patient xmlns="http://hl7.org/fhir"><__proto__ value="x"/></Patient>', /.+/],
    ['a div outside the XHTML namespace', '<Patient xmlns="http://hl7.org/fhir"><text><status value="generated"/><div/></text></Patient>', /namespace/],
    ['nesting beyond the depth limit', `<Patient xmlns="http://hl7.org/fhir">${'<extension url="u">'.repeat(200)}${'</extension>'.repeat(200)}</Patient>`, /.+/],
  ])('rejects %s with FhirXmlError', (_name, xml, message) => {
    const attempt = (): unknown => fromXml(xml);
    expect(attempt).toThrow(FhirXmlError);
    expect(attempt).toThrow(message);
  });

  test('FhirXmlError carries the wire status and issue code', () => {
    try {
      fromXml('<Foo xmlns="http://hl7.org/fhir"/>');
      throw new Error('expected FhirXmlError');
    } catch (error) {
      expect(error).toBeInstanceOf(FhirXmlError);
      expect(error).toMatchObject({ status: 400, code: 'structure', message: "Unknown resource type 'Foo'" });
    }
  });

  test.each([
    ['Slot <status> before <schedule>', '<Slot xmlns="http://hl7.org/fhir"><status value="free"/><schedule><reference value="Schedule/s1"/></schedule></Slot>', 'Slot.schedule'],
    ['a repeat split by another element', '<Patient xmlns="http://hl7.org/fhir"><name><family value="A"/></name><gender value="female"/><name><family value="B"/></name></Patient>', 'Patient.name'],
    ['out of order inside a datatype', '<Patient xmlns="http://hl7.org/fhir"><name><given value="A"/><family value="B"/></name></Patient>', 'Patient.name.family'],
    ['extension after a data element', '<Patient xmlns="http://hl7.org/fhir"><active value="true"/><extension url="http://example.org/x"><valueString value="y"/></extension></Patient>', 'Patient.extension'],
  ])('XML elements out of definition order are rejected: %s', (_name, xml, expression) => {
    expect(() => fromXml(xml)).toThrow(expect.objectContaining({ status: 400, code: 'structure', expression }));
  });

  test('XML elements in definition order, repeats side by side, are read', () => {
    const xml =
      '<Patient xmlns="http://hl7.org/fhir"><id value="p"/><extension url="http://example.org/x"><valueString value="y"/></extension><active value="true"/><name><family value="A"/><given value="B"/><given value="C"/></name><name><family value="D"/></name><gender value="female"/></Patient>';
    expect(fromXml(xml)).toEqual({
      resourceType: 'Patient',
      id: 'p',
      extension: [{ url: 'http://example.org/x', valueString: 'y' }],
      active: true,
      name: [{ family: 'A', given: ['B', 'C'] }, { family: 'D' }],
      gender: 'female',
    });
  });

  test('error messages name the offending element briefly and point at it', () => {
    const longName = 'x'.repeat(100_000);
    const attempt = (): unknown => fromXml(`<Patient xmlns="http://hl7.org/fhir"><${longName} value="1"/></Patient>`);
    expect(attempt).toThrow(FhirXmlError);
    try {
      attempt();
    } catch (error) {
      expect((error as FhirXmlError).message.length).toBeLessThan(200);
      expect((error as FhirXmlError).expression).toMatch(/^Patient\.x+…$/);
    }
    expect(() => fromXml('<'.repeat(100_000))).toThrow(expect.objectContaining({ message: expect.stringMatching(/^.{0,300}$/s) }));
  });

  test('a large but flat hostile document is rejected quickly', () => {
    const started = Date.now();
    const xml = `<!DOCTYPE a [${'<!ENTITY e "x">'.repeat(10000)}]><Patient xmlns="http://hl7.org/fhir"/>`;
    expect(() => fromXml(xml)).toThrow(FhirXmlError);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe('negotiateFormat', () => {
  test.each<[string | undefined, string | undefined, 'json' | 'xml' | undefined]>([
    [undefined, undefined, 'json'],
    ['', undefined, 'json'],
    ['*/*', undefined, 'json'],
    ['application/fhir+json', undefined, 'json'],
    ['application/fhir+xml', undefined, 'xml'],
    ['application/fhir+xml;q=0.9, application/fhir+json', undefined, 'json'],
    ['application/fhir+json;q=0.5, application/fhir+xml;q=0.8', undefined, 'xml'],
    ['application/xml', undefined, 'xml'],
    ['text/xml', undefined, 'xml'],
    ['application/json', undefined, 'json'],
    ['application/fhir+xml; fhirVersion=4.0, */*;q=0.1', undefined, 'xml'],
    ['application/fhir+xml, */*', undefined, 'xml'],
    ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', undefined, 'xml'],
    ['text/html, */*;q=0.8', undefined, 'json'],
    ['application/*', undefined, 'json'],
    ['text/*', undefined, 'xml'],
    ['text/html', undefined, undefined],
    ['application/fhir+json;q=0', undefined, undefined],
    ['*/*, application/fhir+json;q=0', undefined, 'xml'],
    ['application/fhir+json', 'xml', 'xml'],
    ['application/fhir+xml', 'json', 'json'],
    [undefined, 'application/fhir+xml', 'xml'],
    [undefined, 'application/fhir xml', 'xml'],
    [undefined, 'application/xml', 'xml'],
    [undefined, 'text/xml', 'xml'],
    [undefined, 'application/json', 'json'],
    [undefined, 'application/fhir+json', 'json'],
    [undefined, 'XML', 'xml'],
    ['application/fhir+json', 'turtle', undefined],
    ['application/fhir+xml', '', 'xml'],
  ])('Accept %j with _format %j -> %j', (accept, format, expected) => {
    expect(negotiateFormat(accept, format)).toBe(expected);
  });
});

describe('parseBody', () => {
  test('content type constants carry charset=UTF-8 for the ISiK harness', () => {
    expect(FHIR_JSON).toBe('application/fhir+json; charset=UTF-8');
    expect(FHIR_XML).toBe('application/fhir+xml; charset=UTF-8');
  });

  test.each([FHIR_JSON, 'application/json', 'APPLICATION/FHIR+JSON;fhirVersion=4.0'])('reads JSON sent as %s', (type) => {
    expect(parseBody(type, JSON.stringify(slot))).toEqual(slot);
  });

  test.each([FHIR_XML, 'application/xml', 'text/xml; charset=utf-8'])('reads XML sent as %s', (type) => {
    expect(parseBody(type, toXml(slot))).toEqual(slot);
  });

  test.each([undefined, '', 'text/plain', 'application/x-www-form-urlencoded', 'application/fhir+turtle'])(
    'refuses Content-Type %j with UnsupportedMediaType (415)',
    (type) => {
      expect(() => parseBody(type, '{}')).toThrow(UnsupportedMediaType);
      expect(() => parseBody(type, '{}')).toThrow(expect.objectContaining({ status: 415, code: 'not-supported' }));
    },
  );

  test.each([
    ['malformed JSON', '{"resourceType":'],
    ['a JSON array', '[]'],
    ['an object without resourceType', '{"id":"x"}'],
  ])('refuses %s with FhirJsonError (400)', (_name, body) => {
    expect(() => parseBody(FHIR_JSON, body)).toThrow(FhirJsonError);
  });

  test('refuses malformed XML with FhirXmlError', () => {
    expect(() => parseBody(FHIR_XML, '<Slot xmlns="http://hl7.org/fhir">')).toThrow(FhirXmlError);
  });
});

describe('parseJson', () => {
  test.each([
    ['quotes, braces and colons inside strings', '{"a":"x\\"y{\\"a\\":1}","b":"[\\\\","c":{"a":1}}'],
    ['the same key in sibling objects', '{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}'],
    ['nesting at the limit', `${'{"a":'.repeat(MAX_DEPTH - 1)}{}${'}'.repeat(MAX_DEPTH - 1)}`],
    ['a key that only contains a prototype name', '{"myconstructor":1,"__proto":2}'],
  ])('accepts %s', (_name, text) => {
    expect(parseJson(text)).toEqual(JSON.parse(text));
  });

  test.each([
    ['a duplicate key', '{"a":1,"b":{"c":1,"c":2}}', "Duplicate property 'c'", '$this.b.c'],
    ['a duplicate key written with an escape', '{"ab":1,"a\\u0062":2}', "Duplicate property 'ab'", '$this.ab'],
    ['a duplicate key after an array', '{"resourceType":"Patient","name":[{"given":["a"],"given":["b"]}]}', "Duplicate property 'given'", 'Patient.name[0].given'],
    ['__proto__', '{"__proto__":{}}', "Property name '__proto__'", '$this.__proto__'],
    ['valueOf', '{"a":[1,{"valueOf":1}]}', "Property name 'valueOf'", '$this.a[1].valueOf'],
    ['nesting one past the limit', `${'{"a":'.repeat(MAX_DEPTH)}{}${'}'.repeat(MAX_DEPTH)}`, `deeper than ${MAX_DEPTH}`, undefined],
    ['arrays of arrays (never FHIR) past the limit', `${'['.repeat(MAX_DEPTH + 2)}${']'.repeat(MAX_DEPTH + 2)}`, `deeper than ${MAX_DEPTH}`, undefined],
    ['malformed JSON', '{"a":', 'Malformed JSON', undefined],
  ])('refuses %s with a 400 structure error', (_name, text, message, expression) => {
    let error: unknown;
    try {
      parseJson(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FhirJsonError);
    expect((error as FhirJsonError).message).toContain(message);
    if (expression) expect((error as FhirJsonError).expression).toBe(expression);
  });
});

describe('pathSegments', () => {
  test('decodes each segment', () => {
    expect(pathSegments('/Patient/a%2Fb/_history/1')).toEqual(['Patient', 'a/b', '_history', '1']);
  });
  test.each(['/Patient/%E0%A4%A', '/Patient/a%ZZ', '/%/x'])('%s is a 400 invalid, not a URIError', (path) => {
    expect(() => pathSegments(path)).toThrow(expect.objectContaining({ status: 400, code: 'invalid' }));
  });
});
