export { FhirFormatError, FhirJsonError, FhirXmlError, MalformedBody, MalformedUrl, UnsupportedMediaType, XmlSerializationError } from './errors';
export { fromXml } from './from-xml';
export { parseJson } from './json-text';
export { MAX_DEPTH } from './limits';
export { FHIR_JSON, FHIR_XML, type FhirFormat } from './media-types';
export { negotiateFormat } from './negotiate-format';
export { parseBody } from './parse-body';
export { toXml } from './to-xml';
export { formPairs, pathSegments, queryPairs } from './url-path';
