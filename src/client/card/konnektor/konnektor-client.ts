import crypto from 'node:crypto';
import { childrenNamed, descend, textOf, type XmlElement } from '../../../common/xml';
import type { KonConfig } from './kon-file';
import { konnektorFetch } from './konnektor-tls';
import { KON_NS, KON_SERVICES, type KonService } from './namespaces';
import { endpointOf, readServiceDirectory, type ServiceDirectory } from './service-directory';
import { gematikError, KonnektorError, soapCall, type XmlTree } from './soap';

export interface CardInfo {
  handle: string;
  type: string;
  iccsn?: string;
  ctId?: string;
  slotId?: string;
  holder?: string;
}

export type PinStatus = 'VERIFIED' | 'TRANSPORT_PIN' | 'EMPTY_PIN' | 'BLOCKED' | 'VERIFIABLE' | 'DISABLED' | string;

/**
 * A Konnektor answers a card operation within seconds; no PIN entry is started here. Seconds in
 * TERMINUS_CLIENT_KONNEKTOR_TIMEOUT change it (a slow Konnektor, or a test of one).
 */
const DEFAULT_TIMEOUT_MS = 30_000;
const timeoutFromEnv = () => {
  const v = Number(process.env.TERMINUS_CLIENT_KONNEKTOR_TIMEOUT);
  return Number.isFinite(v) && v > 0 ? v * 1000 : undefined;
};

/**
 * The Konnektor operations a login needs (gematik api-telematik conn/*.wsdl), over one TLS
 * connection pool: the service directory once, then EventService.GetCards,
 * CertificateService.ReadCardCertificate, CardService.GetPinStatus and
 * AuthSignatureService.ExternalAuthenticate, each with the call context of the `.kon` file.
 */
export class KonnektorClient {
  private constructor(
    readonly kon: KonConfig,
    readonly directory: ServiceDirectory,
    private readonly fetcher: typeof fetch,
    private readonly timeoutMs: number,
  ) {}

  static async connect(kon: KonConfig, source: string, o: { timeoutMs?: number } = {}): Promise<KonnektorClient> {
    const fetcher = konnektorFetch(kon, source);
    const timeoutMs = o.timeoutMs ?? timeoutFromEnv() ?? DEFAULT_TIMEOUT_MS;
    return new KonnektorClient(kon, await readServiceDirectory(fetcher, kon.url, kon.rewriteServiceEndpoints, timeoutMs), fetcher, timeoutMs);
  }

  /** The version of `service` calls go to (endpointOf's choice). */
  private serviceVersion(service: KonService): string {
    return endpointOf(this.directory, service, this.kon.url).version;
  }

  /** conn/ConnectorContext.xsd: MandantId, ClientSystemId, WorkplaceId, UserId?, in the CONN namespace. */
  private context(): XmlTree {
    const { mandantId, clientSystemId, workplaceId, userId } = this.kon;
    return { 'cctx:Context': { 'conn:MandantId': mandantId, 'conn:ClientSystemId': clientSystemId, 'conn:WorkplaceId': workplaceId, ...(userId ? { 'conn:UserId': userId } : {}) } };
  }

  private async call(service: KonService, operation: string, body: XmlTree): Promise<XmlElement> {
    const { endpoint } = endpointOf(this.directory, service, this.kon.url);
    const action = (KON_SERVICES[service].actions as Record<string, string>)[operation];
    const answer = await soapCall(this.fetcher, endpoint, action, body, this.timeoutMs);
    statusIsOk(answer, `${service}.${operation}`);
    return answer;
  }

  /** EventService.GetCards (conn/EventService.xsd): the cards of `type` in the terminals of this context. */
  async getCards(type = 'SMC-B'): Promise<CardInfo[]> {
    const answer = await this.call('EventService', 'GetCards', { 'evt:GetCards': { '@_mandant-wide': 'false', ...this.context(), 'cardcmn:CardType': type } });
    const cards = descend(answer, KON_NS.card, 'Cards');
    return (cards ? childrenNamed(cards, KON_NS.card, 'Card') : []).map((c) => ({
      handle: textOf(descend(c, KON_NS.conn, 'CardHandle')) ?? '',
      type: textOf(descend(c, KON_NS.cardcmn, 'CardType')) ?? '',
      iccsn: textOf(descend(c, KON_NS.cardcmn, 'Iccsn')),
      ctId: textOf(descend(c, KON_NS.cardcmn, 'CtId')),
      slotId: textOf(descend(c, KON_NS.cardcmn, 'SlotId')),
      holder: textOf(descend(c, KON_NS.card, 'CardHolderName')),
    }));
  }

  /**
   * CertificateService.ReadCardCertificate (conn/CertificateService_v6_0_2.xsd): the card's C.AUT of
   * the key kind asked for (`Crypt`, sent explicitly: the default of a Konnektor that predates it is
   * not specified); undefined when the card has none of that kind.
   */
  async readAuthCertificate(handle: string, crypt: 'ECC' | 'RSA'): Promise<crypto.X509Certificate | undefined> {
    // Crypt came with CertificateService 6.0.1 (XSD 6.0.2); an older Konnektor answers its default key kind.
    const withCrypt = this.serviceVersion('CertificateService') !== '6.0.0';
    if (!withCrypt && crypt === 'RSA') return undefined;
    let answer: XmlElement;
    try {
      answer = await this.call('CertificateService', 'ReadCardCertificate', {
        'cert:ReadCardCertificate': { 'conn:CardHandle': handle, ...this.context(), 'cert:CertRefList': { 'cert:CertRef': 'C.AUT' }, ...(withCrypt ? { 'cert:Crypt': crypt } : {}) },
      });
    } catch (err) {
      // A card without a key of that kind answers with a fault; an RSA-only card is asked again for RSA.
      if (err instanceof KonnektorError && err.kind === 'fault' && crypt === 'ECC') return undefined;
      throw err;
    }
    const list = descend(answer, KON_NS.certcmn, 'X509DataInfoList');
    const info = list ? childrenNamed(list, KON_NS.certcmn, 'X509DataInfo').find((i) => textOf(descend(i, KON_NS.certcmn, 'CertRef')) === 'C.AUT') : undefined;
    const b64 = textOf(descend(info, KON_NS.certcmn, 'X509Data', 'X509Certificate'));
    if (!b64) return undefined;
    try {
      return new crypto.X509Certificate(Buffer.from(b64.replace(/\s+/g, ''), 'base64'));
    } catch {
      throw new KonnektorError('protocol', `the Konnektor answered ReadCardCertificate for card ${handle} with a certificate that does not parse`);
    }
  }

  /** CardService.GetPinStatus (conn/CardService.xsd) of the SMC-B's PIN.SMC. */
  async pinStatus(handle: string, pin = 'PIN.SMC'): Promise<{ status: PinStatus; leftTries?: number }> {
    const answer = await this.call('CardService', 'GetPinStatus', { 'card:GetPinStatus': { ...this.context(), 'conn:CardHandle': handle, 'cardcmn:PinTyp': pin } });
    const left = textOf(descend(answer, KON_NS.card, 'LeftTries'));
    return { status: textOf(descend(answer, KON_NS.card, 'PinStatus')) ?? 'UNKNOWN', leftTries: left === undefined ? undefined : Number(left) };
  }

  /**
   * AuthSignatureService.ExternalAuthenticate (conn/SignatureService.xsd): the card signs `digest`
   * (32 bytes, SHA-256) with its authentication key, ECDSA (`urn:bsi:tr:03111:ecdsa`, answered
   * DER-encoded) or RSASSA-PSS (`urn:ietf:rfc:3447`). Returns the signature bytes as answered.
   */
  async externalAuthenticate(handle: string, digest: Buffer, scheme: 'ecdsa' | 'rsassa-pss'): Promise<Buffer> {
    const optional: XmlTree =
      scheme === 'ecdsa' ? { 'dss:SignatureType': 'urn:bsi:tr:03111:ecdsa' } : { 'dss:SignatureType': 'urn:ietf:rfc:3447', 'sig:SignatureSchemes': 'RSASSA-PSS' };
    const answer = await this.call('AuthSignatureService', 'ExternalAuthenticate', {
      'sig:ExternalAuthenticate': {
        'conn:CardHandle': handle,
        ...this.context(),
        'sig:OptionalInputs': optional,
        'sig:BinaryString': { 'dss:Base64Data': { '@_MimeType': 'application/octet-stream', '#text': digest.toString('base64') } },
      },
    });
    const b64 = textOf(descend(answer, KON_NS.dss, 'SignatureObject', 'Base64Signature'));
    if (!b64) throw new KonnektorError('protocol', `the Konnektor answered ExternalAuthenticate for card ${handle} without dss:SignatureObject/dss:Base64Signature`);
    return Buffer.from(b64.replace(/\s+/g, ''), 'base64');
  }
}

/** conn/ConnectorCommon.xsd Status: Result OK or Warning; an Error in it is the gematik error. */
function statusIsOk(answer: XmlElement, operation: string): void {
  const status = descend(answer, KON_NS.conn, 'Status');
  const result = textOf(descend(status, KON_NS.conn, 'Result'));
  if (result === 'OK' || result === 'Warning') return;
  const trace = descend(status, KON_NS.gerror, 'Error', 'Trace');
  const code = Number(textOf(descend(trace, KON_NS.gerror, 'Code')));
  const text = textOf(descend(trace, KON_NS.gerror, 'ErrorText')) ?? `Status ${result ?? 'missing'}`;
  throw gematikError(text, Number.isInteger(code) && code > 0 ? code : undefined, operation);
}
