import { FhirXmlError } from './errors';
import { parseXmlDocument, type XmlElement, type XmlNode } from './xml-document';
import { XHTML_NS, decodeAttribute, decodeText, escapeAttribute, escapeText } from './xml-text';

// HTML Living Standard §13.1.2 void elements.
const VOID_ELEMENTS = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr']);

/**
 * Narrative.div as JSON carries it: one string holding the `div` element with its namespace
 * declarations (R4 json.html §2.6.2 "xhtml"). Declarations the div inherited from the enclosing
 * XML document are copied onto it so the string stands alone.
 */
export function serializeXhtml(div: XmlElement, where: string): string {
  const inherited: string[] = [];
  for (const prefix of usedPrefixes(div)) {
    const declaration = prefix === '' ? 'xmlns' : `xmlns:${prefix}`;
    const ns = div.scope.get(prefix);
    if (ns === undefined || div.attributes.some((a) => a.qname === declaration)) continue;
    inherited.push(` ${declaration}="${escapeAttribute(ns)}"`);
  }
  return writeElement(div, where, inherited.join(''));
}

/** Checks and canonicalises a JSON div string before it goes inline into an XML document. */
export function normalizeXhtml(div: string, where: string): string {
  const root = parseXmlDocument(div);
  if (root.local !== 'div' || (root.ns !== undefined && root.ns !== XHTML_NS)) {
    throw new FhirXmlError(`Narrative div must be an XHTML <div> element (${where})`, where);
  }
  if (root.ns === XHTML_NS) return serializeXhtml(root, where);
  // A div in no namespace can only mean XHTML here: declare it rather than refuse it.
  if (root.attributes.some((a) => a.qname === 'xmlns')) {
    throw new FhirXmlError(`Narrative div must be in the XHTML namespace (${where})`, where);
  }
  return writeElement(root, where, ` xmlns="${XHTML_NS}"`);
}

function writeElement(element: XmlElement, where: string, extraAttributes = ''): string {
  let out = `<${element.qname}${extraAttributes}`;
  for (const attribute of element.attributes) {
    out += ` ${attribute.qname}="${escapeAttribute(decodeAttribute(attribute.raw, where))}"`;
  }
  // Narrative ends up in HTML pages: `<td/>` would open a cell there, so only void elements
  // are written self-closed.
  if (element.children.length === 0 && VOID_ELEMENTS.has(element.local)) return `${out}/>`;
  out += '>';
  for (const child of element.children) out += writeNode(child, where);
  return `${out}</${element.qname}>`;
}

function writeNode(node: XmlNode, where: string): string {
  switch (node.kind) {
    case 'element':
      return writeElement(node, where);
    case 'text':
      return escapeText(decodeText(node.raw, where));
    case 'cdata':
      return escapeText(node.value);
  }
}

function usedPrefixes(element: XmlElement, into = new Set<string>()): Set<string> {
  into.add(element.qname.includes(':') ? (element.qname.split(':')[0] as string) : '');
  for (const attribute of element.attributes) {
    const [prefix] = attribute.qname.split(':');
    if (attribute.qname.includes(':') && prefix !== 'xmlns' && prefix !== 'xml') into.add(prefix as string);
  }
  for (const child of element.children) if (child.kind === 'element') usedPrefixes(child, into);
  return into;
}
