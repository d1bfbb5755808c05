import { FhirXmlError } from './errors';

export const FHIR_NS = 'http://hl7.org/fhir';
export const XHTML_NS = 'http://www.w3.org/1999/xhtml';

// XML 1.0 §2.2 Char: what an XML document can carry at all.
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

const PREDEFINED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

export function escapeText(value: string): string {
  return value.replace(/[&<>\r]/g, (c) => (c === '\r' ? '&#13;' : `&${c === '&' ? 'amp' : c === '<' ? 'lt' : 'gt'};`));
}

/** Tab, CR and LF as character references: literal ones would be normalised to spaces (XML §3.3.3). */
export function escapeAttribute(value: string): string {
  return value.replace(/[&<>"\t\n\r]/g, (c) => {
    switch (c) {
      case '&':
        return '&amp;';
      case '<':
        return '&lt;';
      case '>':
        return '&gt;';
      case '"':
        return '&quot;';
      default:
        return `&#${c.charCodeAt(0)};`;
    }
  });
}

export function containsNonXmlChar(value: string): boolean {
  return NOT_XML_CHAR.test(value);
}

/** Raw attribute text -> value: XML §3.3.3 normalisation, then references. */
export function decodeAttribute(raw: string, where: string): string {
  return decodeReferences(raw.replace(/\r\n|[\r\n\t]/g, ' '), where);
}

/** Raw character data -> value: XML §2.11 line ends, then references. */
export function decodeText(raw: string, where: string): string {
  return decodeReferences(raw.replace(/\r\n?/g, '\n'), where);
}

/**
 * Only XML's predefined entities and character references exist in FHIR XML: no DTD may declare
 * others (the parser runs with entity processing off, so every reference is decoded here, once).
 */
function decodeReferences(raw: string, where: string): string {
  if (!raw.includes('&')) return raw;
  return raw.replace(/&([^;&]{0,12});?/g, (match, body: string) => {
    if (!match.endsWith(';')) throw new FhirXmlError(`Malformed entity reference in ${where}`, where);
    if (body.startsWith('#')) {
      const code = body.startsWith('#x') ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      const digits = body.startsWith('#x') ? /^#x[0-9a-fA-F]+$/ : /^#[0-9]+$/;
      if (!digits.test(body) || !(code <= 0x10ffff)) {
        throw new FhirXmlError(`Invalid character reference &${body}; in ${where}`, where);
      }
      const char = String.fromCodePoint(code);
      if (containsNonXmlChar(char)) {
        throw new FhirXmlError(`Character reference &${body}; is not an XML character (${where})`, where);
      }
      return char;
    }
    const value = PREDEFINED[body];
    if (value === undefined) {
      throw new FhirXmlError(
        `Unknown entity &${body}; in ${where}: FHIR XML allows only the five predefined XML entities`,
        where,
      );
    }
    return value;
  });
}

/** Input echoed into an error message (it ends up in an OperationOutcome) stays short. */
export function clip(text: string, max = 64): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
