/**
 * The members of xmldom's DOM (the parser xml-crypto itself uses) this code reads. xmldom's own
 * declarations pull TypeScript's browser DOM library into the whole program, which changes the
 * types of Node's fetch; so the module is loaded untyped and typed here.
 */
export interface XmlNode {
  nodeType: number;
  namespaceURI: string | null;
  localName: string | null;
  firstChild: XmlNode | null;
  nextSibling: XmlNode | null;
  parentNode: XmlNode | null;
  textContent: string | null;
}
export interface XmlElement extends XmlNode {
  localName: string;
  getAttribute(name: string): string | null;
}
export interface XmlDocument extends XmlNode {
  documentElement: XmlElement | null;
  getElementsByTagNameNS(ns: string, name: string): ArrayLike<XmlElement>;
}
type ParserOptions = { locator: object; errorHandler: Record<'warning' | 'error' | 'fatalError', (msg: string) => void> };
const { DOMParser } = require('@xmldom/xmldom') as { DOMParser: new (o: ParserOptions) => { parseFromString(xml: string, mime: string): XmlDocument | undefined } };

/** XML that is not well-formed, carries a DOCTYPE, or exceeds the size given. */
export class XmlNotWellFormed extends Error {}

/**
 * Parses XML strictly: any parser error or warning refuses the document, and a DOCTYPE is refused
 * before parsing (the documents read here have none; entity expansion is how XML parsers are exhausted).
 */
export function parseXml(xml: string, what: string, maxBytes: number): XmlDocument {
  if (Buffer.byteLength(xml) > maxBytes) throw new XmlNotWellFormed(`${what} is larger than ${maxBytes} bytes`);
  if (/<!DOCTYPE/i.test(xml)) throw new XmlNotWellFormed(`${what} holds a DOCTYPE declaration`);
  const problems: string[] = [];
  const doc = new DOMParser({
    locator: {},
    errorHandler: { warning: (m: string) => problems.push(m), error: (m: string) => problems.push(m), fatalError: (m: string) => problems.push(m) },
  }).parseFromString(xml, 'application/xml');
  if (problems.length > 0 || !doc?.documentElement) throw new XmlNotWellFormed(`${what} is not well-formed XML: ${problems[0] ?? 'no root element'}`);
  return doc;
}

/** The child elements of `el` with this namespace and local name. */
export function childrenNamed(el: XmlNode, ns: string, name: string): XmlElement[] {
  const out: XmlElement[] = [];
  for (let n = el.firstChild; n; n = n.nextSibling) {
    // An element in no namespace has namespaceURI null; '' asks for those.
    if (n.nodeType === 1 && (n.namespaceURI ?? '') === ns && n.localName === name) out.push(n as XmlElement);
  }
  return out;
}

/** The element reached by following child names from `el`, each step the first match. */
export function descend(el: XmlNode | undefined, ns: string, ...names: string[]): XmlElement | undefined {
  let at: XmlNode | undefined = el;
  for (const name of names) at = at ? childrenNamed(at, ns, name)[0] : undefined;
  return at as XmlElement | undefined;
}

/** The trimmed text of an element, or undefined. */
export function textOf(el: XmlNode | undefined): string | undefined {
  const t = el?.textContent?.trim();
  return t ? t : undefined;
}
