import { parseXml, XmlNotWellFormed, type XmlDocument } from '../../../common/xml';

export { childrenNamed, descend, textOf, type XmlDocument, type XmlElement, type XmlNode } from '../../../common/xml';

/** XML namespaces of a trust-service status list (ETSI TS 119 612 / TS 102 231 v3) and its signature. */
export const NS = {
  tsl: 'http://uri.etsi.org/02231/v2#',
  ds: 'http://www.w3.org/2000/09/xmldsig#',
  xades: 'http://uri.etsi.org/01903/v1.3.2#',
} as const;

/** A list or its signature that cannot be used; `code` is stable (log, metric label, /readyz). */
export class TrustListRejected extends Error {
  constructor(
    readonly code: 'malformed' | 'signature' | 'signer' | 'expired' | 'rollback' | 'unreachable',
    message: string,
  ) {
    super(message);
  }
}

/** Largest list accepted: gematik's TSL is a few megabytes; a hundred times that is an attack. */
export const MAX_LIST_BYTES = 64 * 1024 * 1024;

/** `parseXml` with a trust list's size limit, its failures as a malformed list. */
export function parseXmlStrictly(xml: string, what: string): XmlDocument {
  try {
    return parseXml(xml, what, MAX_LIST_BYTES);
  } catch (err) {
    if (err instanceof XmlNotWellFormed) throw new TrustListRejected('malformed', err.message);
    throw err;
  }
}
