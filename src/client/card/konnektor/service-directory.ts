import { childrenNamed, descend, parseXml, textOf, XmlNotWellFormed } from '../../../common/xml';
import { KON_NS, KON_SERVICES, type KonService } from './namespaces';
import { KonnektorError, unreachableError } from './soap';

export interface ServiceVersion {
  version: string;
  targetNamespace?: string;
  endpointTls?: string;
  endpoint?: string;
}

/** What `connector.sds` says (conn/ServiceDirectory.xsd, conn/ServiceInformation.xsd). */
export interface ServiceDirectory {
  productInformation: Record<string, string | undefined>;
  tlsMandatory?: boolean;
  clientAutMandatory?: boolean;
  services: { name: string; versions: ServiceVersion[] }[];
}

/** Reads `{url}/connector.sds`; with `rewrite`, every endpoint keeps its path and takes scheme, host and port of `url` (kon-format §5). */
export async function readServiceDirectory(fetcher: typeof fetch, url: string, rewrite: boolean, timeoutMs: number): Promise<ServiceDirectory> {
  const sdsUrl = `${url}/connector.sds`;
  let res: Response;
  try {
    res = await fetcher(sdsUrl, { headers: { accept: 'text/xml, application/xml' }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw unreachableError(sdsUrl, err);
  }
  const text = await res.text();
  if (res.status === 401 || res.status === 403) throw new KonnektorError('refused', `the Konnektor refused the client at ${sdsUrl} (HTTP ${res.status}): check the .kon credentials`);
  if (res.status !== 200) throw new KonnektorError('protocol', `the Konnektor answered HTTP ${res.status} at ${sdsUrl}`);
  let root;
  try {
    root = parseXml(text, `the service directory ${sdsUrl}`, 1024 * 1024).documentElement!;
  } catch (err) {
    if (err instanceof XmlNotWellFormed) throw new KonnektorError('protocol', err.message);
    throw err;
  }
  if (root.namespaceURI !== KON_NS.sds || root.localName !== 'ConnectorServices') throw new KonnektorError('protocol', `${sdsUrl} is not a Konnektor service directory (ConnectorServices in ${KON_NS.sds})`);
  const base = new URL(url);
  const relocate = (location: string | undefined) => {
    if (!location || !rewrite) return location;
    const u = new URL(location);
    u.protocol = base.protocol;
    u.host = base.host;
    return u.toString();
  };
  const pi = descend(root, KON_NS.pi, 'ProductInformation');
  const flag = (name: string) => {
    const v = textOf(descend(root, KON_NS.sds, name));
    return v === undefined ? undefined : v === 'true' || v === '1';
  };
  const info = descend(root, KON_NS.si, 'ServiceInformation');
  const services = (info ? childrenNamed(info, KON_NS.si, 'Service') : []).map((service) => ({
    name: service.getAttribute('Name') ?? '',
    versions: childrenNamed(descend(service, KON_NS.si, 'Versions') ?? service, KON_NS.si, 'Version').map((v) => ({
      version: v.getAttribute('Version') ?? '',
      targetNamespace: v.getAttribute('TargetNamespace') ?? undefined,
      endpointTls: relocate(descend(v, KON_NS.si, 'EndpointTLS')?.getAttribute('Location') ?? undefined),
      endpoint: relocate(descend(v, KON_NS.si, 'Endpoint')?.getAttribute('Location') ?? undefined),
    })),
  }));
  return {
    productInformation: {
      productType: textOf(descend(pi, KON_NS.pi, 'ProductTypeInformation', 'ProductType')),
      productTypeVersion: textOf(descend(pi, KON_NS.pi, 'ProductTypeInformation', 'ProductTypeVersion')),
      vendor: textOf(descend(pi, KON_NS.pi, 'ProductIdentification', 'ProductVendorID')),
      productCode: textOf(descend(pi, KON_NS.pi, 'ProductIdentification', 'ProductCode')),
      hwVersion: textOf(descend(pi, KON_NS.pi, 'ProductIdentification', 'ProductVersion', 'Local', 'HWVersion')),
      fwVersion: textOf(descend(pi, KON_NS.pi, 'ProductIdentification', 'ProductVersion', 'Local', 'FWVersion')),
    },
    tlsMandatory: flag('TLSMandatory'),
    clientAutMandatory: flag('ClientAutMandatory'),
    services,
  };
}

/**
 * The endpoint of `name` this client can speak: the highest version of the line its namespace
 * belongs to (EventService 7.2.x, ...), at its TLS endpoint (ServiceInformation.xsd: EndpointTLS
 * is mandatory, Endpoint optional and plain HTTP).
 */
export function endpointOf(sds: ServiceDirectory, name: KonService, url: string): { endpoint: string; version: string } {
  const line = KON_SERVICES[name].major;
  const versions = sds.services.find((s) => s.name === name)?.versions.filter((v) => v.version === line || v.version.startsWith(`${line}.`)) ?? [];
  const best = versions.sort((a, b) => compareVersions(b.version, a.version))[0];
  if (!best?.endpointTls) {
    const offered = sds.services.find((s) => s.name === name)?.versions.map((v) => v.version).join(', ');
    throw new KonnektorError('protocol', `the Konnektor at ${url} offers no ${name} ${line}.x with a TLS endpoint${offered ? ` (it offers ${offered})` : ''}`);
  }
  return { endpoint: best.endpointTls, version: best.version };
}

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
