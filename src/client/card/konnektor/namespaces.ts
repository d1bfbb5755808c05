/**
 * The Konnektor's XML namespaces (gematik api-telematik, conn/*.xsd): the services' majors this
 * client speaks, and the common types. The call context's children are in CONN, not CCTX
 * (conn/ConnectorContext.xsd imports them from ConnectorCommon).
 */
export const KON_NS = {
  soap: 'http://schemas.xmlsoap.org/soap/envelope/',
  sds: 'http://ws.gematik.de/conn/ServiceDirectory/v3.1',
  si: 'http://ws.gematik.de/conn/ServiceInformation/v2.0',
  pi: 'http://ws.gematik.de/int/version/ProductInformation/v1.1',
  conn: 'http://ws.gematik.de/conn/ConnectorCommon/v5.0',
  cctx: 'http://ws.gematik.de/conn/ConnectorContext/v2.0',
  cardcmn: 'http://ws.gematik.de/conn/CardServiceCommon/v2.0',
  card: 'http://ws.gematik.de/conn/CardService/v8.1',
  evt: 'http://ws.gematik.de/conn/EventService/v7.2',
  cert: 'http://ws.gematik.de/conn/CertificateService/v6.0',
  certcmn: 'http://ws.gematik.de/conn/CertificateServiceCommon/v2.0',
  sig: 'http://ws.gematik.de/conn/SignatureService/v7.4',
  dss: 'urn:oasis:names:tc:dss:1.0:core:schema',
  gerror: 'http://ws.gematik.de/tel/error/v2.0',
} as const;

/** The services used, each with the version line its namespace belongs to and the SOAPActions (the WSDLs). */
export const KON_SERVICES = {
  EventService: { major: '7.2', actions: { GetCards: 'http://ws.gematik.de/conn/EventService/v7.2#GetCards' } },
  CardService: { major: '8.1', actions: { GetPinStatus: 'http://ws.gematik.de/conn/CardService/v8.1#GetPinStatus' } },
  CertificateService: { major: '6.0', actions: { ReadCardCertificate: 'http://ws.gematik.de/conn/CertificateService/v6.0#ReadCardCertificate' } },
  // ExternalAuthenticate is typed in the SignatureService namespace (conn/AuthSignatureService_v7_4_1.wsdl);
  // urn:bsi:tr:03111:ecdsa needs 7.4.1 or later.
  AuthSignatureService: { major: '7.4', actions: { ExternalAuthenticate: 'http://ws.gematik.de/conn/SignatureService/v7.4#ExternalAuthenticate' } },
} as const;

export type KonService = keyof typeof KON_SERVICES;
