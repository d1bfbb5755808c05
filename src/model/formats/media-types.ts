// ISiK test harness (IsikGlue "content type json|xml") requires charset=UTF-8 on every response.
export const FHIR_JSON = 'application/fhir+json; charset=UTF-8';
export const FHIR_XML = 'application/fhir+xml; charset=UTF-8';

export type FhirFormat = 'json' | 'xml';

// FHIR R4 http.html §3.1.0.1.7: these spellings SHALL be understood, in `_format` and in headers.
const MIME_TYPES: Readonly<Record<FhirFormat, readonly string[]>> = {
  json: ['application/fhir+json', 'application/json'],
  xml: ['application/fhir+xml', 'application/xml', 'text/xml'],
};

const FORMAT_SHORTHANDS: Readonly<Record<string, FhirFormat>> = { json: 'json', xml: 'xml' };

export function mimeTypesOf(format: FhirFormat): readonly string[] {
  return MIME_TYPES[format];
}

/** `application/fhir+xml; charset=UTF-8` -> `application/fhir+xml` (lower case, no parameters). */
function essenceOf(mediaType: string): string {
  return (mediaType.split(';')[0] ?? '').trim().toLowerCase();
}

export function formatOfMimeType(mediaType: string): FhirFormat | undefined {
  const essence = essenceOf(mediaType);
  if (MIME_TYPES.json.includes(essence)) return 'json';
  if (MIME_TYPES.xml.includes(essence)) return 'xml';
  return undefined;
}

export function formatOfFormatParam(value: string): FhirFormat | undefined {
  // `_format=application/fhir+xml` sent unencoded arrives as `application/fhir xml` once the query
  // string's `+` is decoded as a space.
  const repaired = value.trim().replace(/ /g, '+').toLowerCase();
  return FORMAT_SHORTHANDS[repaired] ?? formatOfMimeType(repaired);
}
