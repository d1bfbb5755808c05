import { XMLBuilder } from 'fast-xml-parser';
import { childrenNamed, descend, parseXml, textOf, XmlNotWellFormed, type XmlElement } from '../../../common/xml';
import { explainKonnektorError } from './gematik-errors';
import { KonnektorError } from './konnektor-error';

export { KonnektorError };
import { KON_NS } from './namespaces';

/** An element tree for the builder: `@_name` attributes, child elements by prefixed name in document order. */
export type XmlTree = { [name: string]: string | number | boolean | XmlTree | XmlTree[] | undefined };

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });

/** A SOAP 1.1 envelope around `body`, every prefix declared on the envelope; text is escaped by the builder. */
export function soapEnvelope(body: XmlTree): string {
  const xmlns = Object.fromEntries(Object.entries(KON_NS).map(([prefix, uri]) => [`@_xmlns:${prefix}`, uri]));
  return builder.build({ 'soap:Envelope': { ...xmlns, 'soap:Body': body } });
}

/** Answers larger than this are not a Konnektor's (a certificate list is a few kilobytes). */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * One SOAP 1.1 call (document/literal, `text/xml`, the SOAPAction of the WSDL); the first element
 * of the answer's Body, or a KonnektorError: a SOAP fault with the gematik error (Code, ErrorText)
 * from its detail (tel/error/TelematikError.xsd).
 */
export async function soapCall(fetcher: typeof fetch, endpoint: string, action: string, body: XmlTree, timeoutMs: number): Promise<XmlElement> {
  let res: Response;
  try {
    res = await fetcher(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'text/xml; charset=UTF-8', soapaction: `"${action}"` },
      body: soapEnvelope(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw unreachableError(endpoint, err);
  }
  const text = await res.text();
  if (res.status === 401 || res.status === 403) throw new KonnektorError('refused', `the Konnektor refused the client at ${endpoint} (HTTP ${res.status}): check the .kon credentials`);
  let answer: XmlElement;
  try {
    answer = parseXml(text, `the Konnektor's answer from ${endpoint}`, MAX_ANSWER_BYTES).documentElement!;
  } catch (err) {
    if (err instanceof XmlNotWellFormed) throw new KonnektorError('protocol', `${err.message} (HTTP ${res.status})`);
    throw err;
  }
  const payload = bodyOf(answer);
  if (!payload) throw new KonnektorError('protocol', `the Konnektor's answer from ${endpoint} is not a SOAP 1.1 envelope with a body (HTTP ${res.status})`);
  if (payload.namespaceURI === KON_NS.soap && payload.localName === 'Fault') throw faultError(payload);
  if (res.status !== 200) throw new KonnektorError('protocol', `the Konnektor answered HTTP ${res.status} at ${endpoint}`);
  return payload;
}

function bodyOf(envelope: XmlElement): XmlElement | undefined {
  if (envelope.namespaceURI !== KON_NS.soap || envelope.localName !== 'Envelope') return undefined;
  const body = descend(envelope, KON_NS.soap, 'Body');
  for (let n = body?.firstChild; n; n = n.nextSibling) if (n.nodeType === 1) return n as XmlElement;
  return undefined;
}

function faultError(fault: XmlElement): KonnektorError {
  // SOAP 1.1 §4.4: faultcode and faultstring are unqualified; the gematik error sits in detail.
  const child = (name: string) => childrenNamed(fault, '', name)[0] ?? childrenNamed(fault, KON_NS.soap, name)[0];
  const error = descend(child('detail'), KON_NS.gerror, 'Error');
  const trace = error ? childrenNamed(error, KON_NS.gerror, 'Trace')[0] : undefined;
  const code = Number(textOf(descend(trace, KON_NS.gerror, 'Code')));
  const text = textOf(descend(trace, KON_NS.gerror, 'ErrorText')) ?? textOf(child('faultstring')) ?? 'no reason given';
  return gematikError(text, Number.isInteger(code) && code > 0 ? code : undefined);
}

/** A fault or error status: the practice's sentence first (when the code is known), the Konnektor's text and code after it. */
export function gematikError(text: string, code: number | undefined, operation?: string): KonnektorError {
  const explained = explainKonnektorError(code);
  const said = `${operation ? `${operation}: ` : ''}${text}${code !== undefined ? `, gematik error ${code}` : ''}`;
  return new KonnektorError('fault', explained ? `${explained} (the Konnektor says: ${said})` : `the Konnektor refused: ${said}`, code);
}

export function unreachableError(url: string, err: unknown): KonnektorError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  // The TLS checks of konnektor-tls.ts refuse inside the connection; fetch hands their error on as the cause.
  if (cause instanceof KonnektorError) return cause;
  if ((err as Error).name === 'TimeoutError') return new KonnektorError('unreachable', `the Konnektor at ${url} did not answer in time`);
  const detail = cause?.code ? `${cause.code}${cause.message ? `: ${cause.message}` : ''}` : (cause?.message ?? (err as Error).message);
  return new KonnektorError('unreachable', `the Konnektor at ${url} cannot be reached (${detail})`);
}
