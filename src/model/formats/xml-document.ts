import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { FhirXmlError } from './errors';
import { MAX_DEPTH } from './limits';
import { clip } from './xml-text';

/** A namespace-resolved view of a parsed XML document; text stays raw (see xml-text.ts). */
export interface XmlElement {
  readonly kind: 'element';
  readonly qname: string;
  readonly local: string;
  readonly ns: string | undefined;
  readonly attributes: readonly XmlAttribute[];
  readonly children: readonly XmlNode[];
  /** In-scope namespace declarations, prefix -> namespace ('' is the default namespace). */
  readonly scope: ReadonlyMap<string, string>;
}

export interface XmlAttribute {
  readonly qname: string;
  readonly local: string;
  /** undefined for unprefixed attributes (XML Namespaces §6.2: they are in no namespace). */
  readonly ns: string | undefined;
  readonly raw: string;
}

export type XmlNode = XmlElement | { readonly kind: 'text'; readonly raw: string } | { readonly kind: 'cdata'; readonly value: string };

const XML_NS = 'http://www.w3.org/XML/1998/namespace';
const XMLNS_NS = 'http://www.w3.org/2000/xmlns/';

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  trimValues: false,
  parseTagValue: false,
  parseAttributeValue: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  // Off: references are decoded by us, once, and only the predefined ones (xml-text.ts).
  processEntities: false,
  htmlEntities: false,
  cdataPropName: '#cdata',
  commentPropName: false,
  maxNestedTags: MAX_DEPTH,
});

type FxpNode = Record<string, unknown>;

/**
 * Parses one XML document with a single root element. Throws FhirXmlError for anything that is
 * not well-formed, for any DOCTYPE (FHIR R4 xml.html forbids DTDs; refusing them outright means
 * no entity can be declared, so neither "billion laughs" expansion nor XXE is possible), and for
 * undeclared namespace prefixes.
 */
export function parseXmlDocument(xml: string): XmlElement {
  const text = xml.startsWith('\uFEFF') ? xml.slice(1) : xml;
  if (/<!DOCTYPE/i.test(text)) {
    throw new FhirXmlError('XML with a DOCTYPE declaration is not accepted (FHIR XML must not use DTDs or entities)');
  }
  const validation = XMLValidator.validate(text);
  if (validation !== true) {
    const { msg, line, col } = validation.err;
    throw new FhirXmlError(`Malformed XML at line ${line}${col === undefined ? '' : `, column ${col}`}: ${clip(msg, 200)}`);
  }

  let parsed: FxpNode[];
  try {
    parsed = parser.parse(text) as FxpNode[];
  } catch (error) {
    throw new FhirXmlError(`Malformed XML: ${clip((error as Error).message, 200)}`);
  }

  const roots = toNodes(parsed, new Map([['xml', XML_NS]]), 0).filter((node) => {
    if (node.kind === 'element') return true;
    if (node.kind === 'text' && node.raw.trim() === '') return false;
    throw new FhirXmlError('Malformed XML: text outside the root element');
  });
  const [root] = roots;
  if (roots.length !== 1 || root?.kind !== 'element') {
    throw new FhirXmlError('Malformed XML: a document must have exactly one root element');
  }
  return root;
}

function toNodes(items: readonly FxpNode[], scope: ReadonlyMap<string, string>, depth: number): XmlNode[] {
  if (depth > MAX_DEPTH) throw new FhirXmlError(`XML nesting deeper than ${MAX_DEPTH} elements`);
  return items.map((item): XmlNode => {
    if ('#text' in item) return { kind: 'text', raw: String(item['#text']) };
    if ('#cdata' in item) {
      const parts = item['#cdata'] as FxpNode[];
      return { kind: 'cdata', value: parts.map((part) => String(part['#text'] ?? '')).join('') };
    }
    const qname = Object.keys(item).find((key) => key !== ':@');
    if (qname === undefined) throw new FhirXmlError('Malformed XML: unexpected node');
    return toElement(qname, item[qname] as FxpNode[], (item[':@'] ?? {}) as Record<string, unknown>, scope, depth);
  });
}

function toElement(
  qname: string,
  children: readonly FxpNode[],
  rawAttributes: Record<string, unknown>,
  parentScope: ReadonlyMap<string, string>,
  depth: number,
): XmlElement {
  let scope = parentScope;
  for (const [name, value] of Object.entries(rawAttributes)) {
    if (name === 'xmlns' || name.startsWith('xmlns:')) {
      if (scope === parentScope) scope = new Map(parentScope);
      (scope as Map<string, string>).set(name === 'xmlns' ? '' : name.slice(6), String(value));
    }
  }

  const attributes: XmlAttribute[] = Object.entries(rawAttributes).map(([name, value]) => {
    const raw = String(value);
    if (name === 'xmlns' || name.startsWith('xmlns:')) return { qname: name, local: name, ns: XMLNS_NS, raw };
    const { prefix, local } = splitQName(name);
    return { qname: name, local, ns: prefix === undefined ? undefined : resolve(prefix, scope, name), raw };
  });

  const { prefix, local } = splitQName(qname);
  const ns = resolve(prefix ?? '', scope, qname);
  return { kind: 'element', qname, local, ns, attributes, children: toNodes(children, scope, depth + 1), scope };
}

function splitQName(qname: string): { prefix: string | undefined; local: string } {
  const parts = qname.split(':');
  if (parts.length === 1) return { prefix: undefined, local: qname };
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    throw new FhirXmlError(`Malformed XML: invalid qualified name '${clip(qname)}'`);
  }
  return { prefix: parts[0], local: parts[1] as string };
}

function resolve(prefix: string, scope: ReadonlyMap<string, string>, qname: string): string | undefined {
  const ns = scope.get(prefix);
  if (prefix === '') return ns === '' ? undefined : ns;
  if (ns === undefined || ns === '') throw new FhirXmlError(`Malformed XML: undeclared namespace prefix in '${clip(qname)}'`);
  return ns;
}
