export { FhirFormatError, FhirJsonError, FhirXmlError, UnsupportedMediaType, XmlSerializationError } from './errors';
export { fromXml } from './from-xml';
export { FHIR_JSON, FHIR_XML, type FhirFormat } from './media-types';
export { negotiateFormat } from './negotiate-format';
export { parseBody } from './parse-body';
export { toXml } from './to-xml';
