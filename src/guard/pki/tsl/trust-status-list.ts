import crypto from 'node:crypto';
import { NS, TrustListRejected, childrenNamed, descend, parseXmlStrictly, textOf, type XmlElement } from './xml-dom';

/** One TSPService of the list (ETSI TS 119 612 §5.5). */
export interface ListedService {
  type: string;
  name?: string;
  status: string;
  statusStartingTime?: Date;
  certificates: crypto.X509Certificate[];
  /** ExtensionOID values of its ServiceInformationExtensions (gematik marks what a CA issues with them). */
  extensionOids: string[];
}

/** What Terminus reads from a trust-service status list. */
export interface TrustStatusList {
  id?: string;
  sequenceNumber: bigint;
  issued: Date;
  nextUpdate: Date;
  services: ListedService[];
}

/**
 * Reads the parts of a (signed, already verified) trust-service status list that trust decisions
 * need: scheme information (§5.3: sequence number, issue time, next update) and every service with
 * its type, status, certificates and extensions (§5.5). Anything missing or unreadable there
 * refuses the whole list.
 */
export function readTrustStatusList(signedXml: string, what: string): TrustStatusList {
  const root = parseXmlStrictly(signedXml, what).documentElement!;
  if (root.namespaceURI !== NS.tsl || root.localName !== 'TrustServiceStatusList') {
    throw new TrustListRejected('malformed', `${what} is not a TrustServiceStatusList in ${NS.tsl} (root ${root.namespaceURI ?? ''} ${root.localName})`);
  }
  const scheme = descend(root, NS.tsl, 'SchemeInformation');
  const seq = textOf(descend(scheme, NS.tsl, 'TSLSequenceNumber'));
  if (!seq || !/^\d{1,18}$/.test(seq)) throw new TrustListRejected('malformed', `${what}: SchemeInformation/TSLSequenceNumber is missing or not a number`);
  // ETSI TS 119 612 §5.3.15: a list without NextUpdate/dateTime is closed (the scheme ended); no trust comes from it.
  const nextUpdate = dateOf(textOf(descend(scheme, NS.tsl, 'NextUpdate', 'dateTime')), `${what}: SchemeInformation/NextUpdate/dateTime`);
  const issued = dateOf(textOf(descend(scheme, NS.tsl, 'ListIssueDateTime')), `${what}: SchemeInformation/ListIssueDateTime`);
  const providers = descend(root, NS.tsl, 'TrustServiceProviderList');
  const services = (providers ? childrenNamed(providers, NS.tsl, 'TrustServiceProvider') : [])
    .flatMap((tsp) => {
      const list = descend(tsp, NS.tsl, 'TSPServices');
      return list ? childrenNamed(list, NS.tsl, 'TSPService') : [];
    })
    .map((service, i) => readService(service, `${what}: TSPService ${i + 1}`));
  return { id: root.getAttribute('Id') || undefined, sequenceNumber: BigInt(seq), issued, nextUpdate, services };
}

function readService(service: XmlElement, where: string): ListedService {
  const info = descend(service, NS.tsl, 'ServiceInformation');
  const type = textOf(descend(info, NS.tsl, 'ServiceTypeIdentifier'));
  const status = textOf(descend(info, NS.tsl, 'ServiceStatus'));
  if (!type || !status) throw new TrustListRejected('malformed', `${where}: ServiceTypeIdentifier and ServiceStatus are required`);
  const start = textOf(descend(info, NS.tsl, 'StatusStartingTime'));
  const identity = descend(info, NS.tsl, 'ServiceDigitalIdentity');
  const certificates = (identity ? childrenNamed(identity, NS.tsl, 'DigitalId') : [])
    .flatMap((id) => childrenNamed(id, NS.tsl, 'X509Certificate'))
    .map((el, j) => {
      try {
        return new crypto.X509Certificate(Buffer.from((textOf(el) ?? '').replace(/\s+/g, ''), 'base64'));
      } catch {
        throw new TrustListRejected('malformed', `${where}: DigitalId certificate ${j + 1} does not parse`);
      }
    });
  const extensions = descend(info, NS.tsl, 'ServiceInformationExtensions');
  const extensionOids = (extensions ? childrenNamed(extensions, NS.tsl, 'Extension') : [])
    .flatMap((ext) => childrenNamed(ext, NS.tsl, 'ExtensionOID'))
    .map(textOf)
    .filter((oid): oid is string => oid !== undefined);
  return {
    type,
    name: textOf(descend(info, NS.tsl, 'ServiceName', 'Name')),
    status,
    statusStartingTime: start ? dateOf(start, `${where}: StatusStartingTime`) : undefined,
    certificates,
    extensionOids,
  };
}

function dateOf(text: string | undefined, where: string): Date {
  const d = text && /^\d{4}-\d\d-\d\dT/.test(text) ? new Date(text) : undefined;
  if (!d || Number.isNaN(d.getTime())) throw new TrustListRejected('malformed', `${where} is missing or not an xsd:dateTime`);
  return d;
}

/** ETSI TS 119 612 Annex D / TS 102 231 v3: a CA issuing public-key certificates. */
export const CA_PKC = 'http://uri.etsi.org/TrstSvc/Svctype/CA/PKC';

/**
 * Statuses under which a CA's certificates are trusted: `inaccord` (TS 102 231 v3, what gematik's
 * list says of all its services) and `granted` (TS 119 612 v2); `revoked`, `withdrawn` and the
 * rest are not.
 */
export const CURRENT_STATUSES = new Set([
  'http://uri.etsi.org/TrstSvc/Svcstatus/inaccord',
  'http://uri.etsi.org/TrstSvc/Svcstatus/granted',
  'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted',
]);

/**
 * gematik's ExtensionOIDs of CAs that issue institution (SMC-B, C.HCI.AUT: oid_smc_b_aut) and
 * health-professional cards (HBA, C.HP.AUT: oid_hba_aut) authentication certificates (gemSpec_OID).
 */
export const CARD_AUT_ISSUER_OIDS = new Set(['1.2.276.0.76.4.77', '1.2.276.0.76.4.75']);
/** gematik's ExtensionOID arc: a CA whose extensions use it says what it issues. */
const GEMATIK_OID_ARC = '1.2.276.0.76.4.';

/**
 * The card-issuing CAs of a list: CA/PKC services in a current status since `now`, and where the
 * service's gematik extensions say what it issues, only those that issue SMC-B or HBA
 * authentication certificates.
 */
export function cardIssuers(list: TrustStatusList, now: Date): crypto.X509Certificate[] {
  return list.services
    .filter((s) => s.type === CA_PKC && CURRENT_STATUSES.has(s.status))
    .filter((s) => !s.statusStartingTime || s.statusStartingTime <= now)
    .filter((s) => {
      const marks = s.extensionOids.filter((oid) => oid.startsWith(GEMATIK_OID_ARC));
      return marks.length === 0 || marks.some((oid) => CARD_AUT_ISSUER_OIDS.has(oid));
    })
    .flatMap((s) => s.certificates);
}
