import type { Resource } from '@medplum/fhirtypes';
import { FhirJsonError, UnsupportedMediaType } from './errors';
import { fromXml } from './from-xml';
import { parseJson } from './json-text';
import { formatOfMimeType } from './media-types';

/**
 * Reads a request body by its Content-Type (FHIR R4 http.html: fhir+json/fhir+xml and the plain
 * json/xml spellings). The caller decodes bytes to text (UTF-8) and bounds the size.
 * Throws UnsupportedMediaType (415), FhirJsonError or FhirXmlError (400).
 */
export function parseBody(contentType: string | undefined, rawText: string): Resource {
  const format = contentType === undefined ? undefined : formatOfMimeType(contentType);
  if (format === undefined) {
    throw new UnsupportedMediaType(
      contentType === undefined || contentType.trim() === ''
        ? 'Missing Content-Type: send application/fhir+json or application/fhir+xml'
        : `Unsupported Content-Type '${contentType}': send application/fhir+json or application/fhir+xml`,
    );
  }
  return format === 'xml' ? fromXml(rawText) : fromJson(rawText);
}

function fromJson(rawText: string): Resource {
  const parsed = parseJson(rawText);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new FhirJsonError('Body is not a FHIR resource: expected a JSON object');
  }
  if (typeof (parsed as { resourceType?: unknown }).resourceType !== 'string') {
    throw new FhirJsonError('Body is not a FHIR resource: resourceType is missing');
  }
  return parsed as Resource;
}
