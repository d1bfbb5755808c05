import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type tls from 'node:tls';
import { XMLBuilder } from 'fast-xml-parser';
import { childrenNamed, parseXml, textOf, type XmlElement } from '../../src/common/xml';

// A Konnektor stand-in, written from gematik's WSDLs and XSDs (api-telematik conn/): no Konnektor
// can run here. A real SOAP 1.1 server over TLS (client certificate or basic auth) that checks what
// a Konnektor's schema validation would (namespaces, element order, SOAPAction), with SMC-Bs whose
// keys sign as a card does: a given SHA-256 digest, ECDSA answered DER-encoded, RSA with PSS.
// Its namespaces and SOAPActions are written out here from the WSDLs, not taken from the client,
// so that a wrong one in the client fails the tests.

/** The namespaces of the schemas (api-telematik conn/*.xsd, tel/error/TelematikError.xsd, OASIS DSS core 1.0). */
const NS = {
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

/**
 * Per endpoint (`/ws/<service>`), each operation's request element namespace and the soapAction of
 * its WSDL binding: conn/EventService.wsdl, conn/CardService_v8_1_2.wsdl,
 * conn/CertificateService_v6_0_1.wsdl and conn/AuthSignatureService_v7_4_1.wsdl, whose
 * ExternalAuthenticate is typed and named in the SignatureService 7.4 namespace.
 */
const OPERATIONS: Record<string, Record<string, { ns: string; action: string }>> = {
  EventService: { GetCards: { ns: NS.evt, action: 'http://ws.gematik.de/conn/EventService/v7.2#GetCards' } },
  CardService: { GetPinStatus: { ns: NS.card, action: 'http://ws.gematik.de/conn/CardService/v8.1#GetPinStatus' } },
  CertificateService: { ReadCardCertificate: { ns: NS.cert, action: 'http://ws.gematik.de/conn/CertificateService/v6.0#ReadCardCertificate' } },
  AuthSignatureService: { ExternalAuthenticate: { ns: NS.sig, action: 'http://ws.gematik.de/conn/SignatureService/v7.4#ExternalAuthenticate' } },
};

/** dss:SignatureType values of ExternalAuthenticate: ECDSA (since AuthSignatureService 7.4.1) and RSA (PKCS #1, RFC 3447). */
const ECDSA = 'urn:bsi:tr:03111:ecdsa';
const RSA = 'urn:ietf:rfc:3447';
/** SIG:SignatureSchemes (conn/SignatureService.xsd): the RSA padding; only RSASSA-PSS gives PS256. */
const SIGNATURE_SCHEMES = ['RSASSA-PSS', 'RSASSA-PKCS1-v1_5'];

export interface StandInCard {
  handle: string;
  iccsn?: string;
  holder?: string;
  /** C.AUT certificates and keys by kind; a card may have either or both. */
  ecc?: { certPem: string; keyPem: string };
  rsa?: { certPem: string; keyPem: string };
  pin?: 'VERIFIED' | 'VERIFIABLE' | 'BLOCKED' | 'TRANSPORT_PIN';
}

export interface StandInOptions {
  cert: string;
  key: string;
  /** mTLS: the CA the client certificate must chain to. */
  clientCa?: string;
  basic?: { username: string; password: string };
  maxVersion?: tls.SecureVersion;
  context: { mandantId: string; clientSystemId: string; workplaceId: string };
  cards: StandInCard[];
  /** Every answer waits this long first (a slow Konnektor, or a timeout). */
  delayMs?: number;
  /** A SOAP fault with this gematik code for one operation. */
  fault?: { operation: string; code: number; text: string };
  /**
   * An answer (HTTP 200) to one operation whose CONN:Status carries the error instead of the result:
   * Result ERROR (the ResultEnum of conn/ConnectorCommon.xsd) and a GERROR:Error with this code.
   */
  statusError?: { operation: string; code: number; text: string };
  /** The base its service directory names (a Konnektor behind NAT names addresses the client cannot reach). */
  advertise?: string;
}

/** What one ExternalAuthenticate asked the card for. */
export interface SignatureRequest {
  handle: string;
  signatureType?: string;
  signatureSchemes?: string;
  /** The digest the card signed (base64). */
  digest: string;
}

export interface StandIn {
  url: string;
  calls: Record<string, number>;
  /** Every ExternalAuthenticate the stand-in answered, in order. */
  signatures: SignatureRequest[];
  options: StandInOptions;
  close(): Promise<void>;
}

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });
const xmlns = Object.fromEntries(Object.entries(NS).map(([p, u]) => [`@_xmlns:${p}`, u]));
const envelope = (body: object) => builder.build({ 'soap:Envelope': { ...xmlns, 'soap:Body': body } });
const OK = { 'conn:Status': { 'conn:Result': 'OK' } };

class SchemaViolation extends Error {}

export async function startKonnektorStandIn(options: StandInOptions): Promise<StandIn> {
  const calls: Record<string, number> = {};
  const signatures: SignatureRequest[] = [];
  let url = '';
  let closed = false;
  const server = https.createServer(
    {
      cert: fs.readFileSync(options.cert),
      key: fs.readFileSync(options.key),
      ...(options.clientCa ? { ca: fs.readFileSync(options.clientCa), requestCert: true, rejectUnauthorized: true } : {}),
      ...(options.maxVersion ? { maxVersion: options.maxVersion } : {}),
    },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
          // A delayed answer to a client that gave up, after the test closed the stand-in: nothing to say.
          if (closed) return void res.destroy();
          if (options.basic) {
            const expected = `Basic ${Buffer.from(`${options.basic.username}:${options.basic.password}`).toString('base64')}`;
            if (req.headers.authorization !== expected) return res.writeHead(401, { 'www-authenticate': 'Basic realm="Konnektor"' }).end();
          }
          if (req.method === 'GET' && req.url === '/connector.sds') {
            calls.sds = (calls.sds ?? 0) + 1;
            return res.writeHead(200, { 'content-type': 'text/xml; charset=UTF-8' }).end(serviceDirectory(options.advertise ?? url));
          }
          const service = /^\/ws\/(\w+)$/.exec(req.url ?? '')?.[1];
          if (req.method !== 'POST' || !service || !Object.hasOwn(OPERATIONS, service)) return res.writeHead(404).end();
          try {
            const body = soapBody(Buffer.concat(chunks).toString('utf8'));
            const operation = body.localName;
            const known = Object.hasOwn(OPERATIONS[service], operation) ? OPERATIONS[service][operation] : undefined;
            if (!known) throw new SchemaViolation(`${service} has no operation ${operation}`);
            if (body.namespaceURI !== known.ns) throw new SchemaViolation(`${operation} is in ${body.namespaceURI}, not ${known.ns}`);
            // WS-I Basic Profile 1.1 R1109: the SOAPAction header is the quoted soapAction of the binding.
            if (req.headers.soapaction !== `"${known.action}"`) throw new SchemaViolation(`SOAPAction ${req.headers.soapaction} does not name ${service}.${operation}`);
            calls[operation] = (calls[operation] ?? 0) + 1;
            if (options.fault?.operation === operation) return fault(res, options.fault.code, options.fault.text);
            const answer = await handle(options, operation, body, signatures);
            if (options.statusError?.operation === operation) {
              const [name] = Object.keys(answer);
              const e = options.statusError;
              return res.writeHead(200, { 'content-type': 'text/xml; charset=UTF-8' }).end(envelope({ [name]: { 'conn:Status': { 'conn:Result': 'ERROR', 'gerror:Error': gematikError(e.code, e.text) } } }));
            }
            res.writeHead(200, { 'content-type': 'text/xml; charset=UTF-8' }).end(envelope(answer));
          } catch (err) {
            if (err instanceof CardFault) return fault(res, err.code, err.message);
            fault(res, 4000, `schema violation: ${(err as Error).message}`);
          }
        })().catch(() => res.destroy());
      });
    },
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    signatures,
    options,
    close: () =>
      new Promise((r) => {
        closed = true;
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function serviceDirectory(base: string): string {
  const version = (v: string, ns: string, service: string) => ({ '@_TargetNamespace': ns, '@_Version': v, 'si:EndpointTLS': { '@_Location': `${base}/ws/${service}` } });
  return builder.build({
    'sds:ConnectorServices': {
      ...xmlns,
      'pi:ProductInformation': {
        'pi:InformationDate': new Date().toISOString(),
        'pi:ProductTypeInformation': { 'pi:ProductType': 'Konnektor', 'pi:ProductTypeVersion': '5.0.0' },
        'pi:ProductIdentification': { 'pi:ProductVendorID': 'TERMINUS', 'pi:ProductCode': 'STANDIN', 'pi:ProductVersion': { 'pi:Local': { 'pi:HWVersion': '1.0.0', 'pi:FWVersion': '5.0.0' } } },
      },
      'sds:TLSMandatory': 'true',
      'sds:ClientAutMandatory': 'false',
      'si:ServiceInformation': {
        'si:Service': [
          { '@_Name': 'EventService', 'si:Versions': { 'si:Version': [version('7.2.0', NS.evt, 'EventService')] } },
          { '@_Name': 'CardService', 'si:Versions': { 'si:Version': [version('8.1.2', NS.card, 'CardService')] } },
          { '@_Name': 'CertificateService', 'si:Versions': { 'si:Version': [version('6.0.0', NS.cert, 'CertificateService'), version('6.0.1', NS.cert, 'CertificateService')] } },
          // An older line the client must not pick for ExternalAuthenticate with ECDSA.
          { '@_Name': 'AuthSignatureService', 'si:Versions': { 'si:Version': [version('7.4.1', NS.sig, 'AuthSignatureService'), version('7.3.0', 'http://ws.gematik.de/conn/SignatureService/v7.3', 'AuthSignatureServiceOld')] } },
        ],
      },
    },
  });
}

function soapBody(text: string): XmlElement {
  const env = parseXml(text, 'the request', 1024 * 1024).documentElement!;
  if (env.namespaceURI !== NS.soap || env.localName !== 'Envelope') throw new SchemaViolation('not a SOAP 1.1 envelope');
  const body = childrenNamed(env, NS.soap, 'Body')[0];
  const first = body ? elements(body)[0] : undefined;
  if (!first) throw new SchemaViolation('empty SOAP body');
  return first;
}

const elements = (el: XmlElement): XmlElement[] => {
  const out: XmlElement[] = [];
  for (let n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 1) out.push(n as XmlElement);
  return out;
};

/** The children of `el` must be exactly these (namespace, name), in this order; `?` marks optional ones. */
function sequence(el: XmlElement, spec: [string, string][]): Record<string, XmlElement> {
  const kids = elements(el);
  const out: Record<string, XmlElement> = {};
  let i = 0;
  for (const [ns, name] of spec) {
    const optional = name.endsWith('?');
    const local = name.replace(/\?$/, '');
    const k = kids[i];
    if (k && k.namespaceURI === ns && k.localName === local) {
      out[local] = k;
      i++;
    } else if (!optional) throw new SchemaViolation(`${el.localName}: expected {${ns}}${local} at position ${i + 1}, found ${k ? `{${k.namespaceURI}}${k.localName}` : 'nothing'}`);
  }
  if (i < kids.length) throw new SchemaViolation(`${el.localName}: unexpected {${kids[i].namespaceURI}}${kids[i].localName}`);
  return out;
}

function checkContext(o: StandInOptions, ctx: XmlElement): void {
  const c = sequence(ctx, [
    [NS.conn, 'MandantId'],
    [NS.conn, 'ClientSystemId'],
    [NS.conn, 'WorkplaceId'],
    [NS.conn, 'UserId?'],
  ]);
  const got = { mandantId: textOf(c.MandantId), clientSystemId: textOf(c.ClientSystemId), workplaceId: textOf(c.WorkplaceId) };
  if (got.mandantId !== o.context.mandantId) throw new CardFault(4004, 'Ungültige Mandanten-ID');
  if (got.clientSystemId !== o.context.clientSystemId) throw new CardFault(4005, 'Ungültige Clientsystem-ID');
  if (got.workplaceId !== o.context.workplaceId) throw new CardFault(4006, 'Ungültige Arbeitsplatz-ID');
}

class CardFault extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

function cardOf(o: StandInOptions, handle: string | undefined): StandInCard {
  const card = o.cards.find((c) => c.handle === handle);
  if (!card) throw new CardFault(4047, 'Karten-Handle ungültig');
  return card;
}

async function handle(o: StandInOptions, operation: string, body: XmlElement, signatures: SignatureRequest[]): Promise<Record<string, object>> {
  switch (operation) {
    case 'GetCards': {
      const p = sequence(body, [
        [NS.cctx, 'Context'],
        [NS.cardcmn, 'CtId?'],
        [NS.cardcmn, 'SlotId?'],
        [NS.cardcmn, 'CardType?'],
      ]);
      checkContext(o, p.Context);
      const type = textOf(p.CardType);
      const cards = o.cards.filter(() => type === undefined || type === 'SMC-B');
      return {
        'evt:GetCardsResponse': {
          ...OK,
          'card:Cards': {
            'card:Card': cards.map((c, i) => ({
              'conn:CardHandle': c.handle,
              'cardcmn:CardType': 'SMC-B',
              ...(c.iccsn ? { 'cardcmn:Iccsn': c.iccsn } : {}),
              'cardcmn:CtId': 'CT1',
              'cardcmn:SlotId': String(i + 1),
              'card:InsertTime': new Date().toISOString(),
              ...(c.holder ? { 'card:CardHolderName': c.holder } : {}),
            })),
          },
        },
      };
    }
    case 'ReadCardCertificate': {
      const p = sequence(body, [
        [NS.conn, 'CardHandle'],
        [NS.cctx, 'Context'],
        [NS.cert, 'CertRefList'],
        [NS.cert, 'Crypt?'],
      ]);
      checkContext(o, p.Context);
      const card = cardOf(o, textOf(p.CardHandle));
      const refs = elements(p.CertRefList).map((e) => textOf(e));
      if (refs.join() !== 'C.AUT') throw new SchemaViolation(`CertRefList ${refs.join()}`);
      const crypt = textOf(p.Crypt) ?? 'ECC';
      const key = crypt === 'RSA' ? card.rsa : card.ecc;
      if (!key) throw new CardFault(4000, `no ${crypt} C.AUT on the card`);
      const x = new crypto.X509Certificate(key.certPem);
      return {
        'cert:ReadCardCertificateResponse': {
          ...OK,
          'certcmn:X509DataInfoList': {
            'certcmn:X509DataInfo': {
              'certcmn:CertRef': 'C.AUT',
              'certcmn:X509Data': {
                'certcmn:X509IssuerSerial': { 'certcmn:X509IssuerName': x.issuer.replace(/\n/g, ','), 'certcmn:X509SerialNumber': BigInt(`0x${x.serialNumber}`).toString() },
                'certcmn:X509SubjectName': x.subject.replace(/\n/g, ','),
                'certcmn:X509Certificate': x.raw.toString('base64'),
              },
            },
          },
        },
      };
    }
    case 'GetPinStatus': {
      const p = sequence(body, [
        [NS.cctx, 'Context'],
        [NS.conn, 'CardHandle'],
        [NS.cardcmn, 'PinTyp'],
      ]);
      checkContext(o, p.Context);
      const card = cardOf(o, textOf(p.CardHandle));
      if (textOf(p.PinTyp) !== 'PIN.SMC') throw new SchemaViolation(`PinTyp ${textOf(p.PinTyp)} for an SMC-B`);
      return { 'card:GetPinStatusResponse': { ...OK, 'card:PinStatus': card.pin ?? 'VERIFIED', ...(card.pin === 'VERIFIABLE' ? { 'card:LeftTries': '3' } : {}) } };
    }
    case 'ExternalAuthenticate': {
      const p = sequence(body, [
        [NS.conn, 'CardHandle'],
        [NS.cctx, 'Context'],
        [NS.sig, 'OptionalInputs?'],
        [NS.sig, 'BinaryString'],
      ]);
      checkContext(o, p.Context);
      const card = cardOf(o, textOf(p.CardHandle));
      if ((card.pin ?? 'VERIFIED') !== 'VERIFIED') throw new CardFault(4085, 'Zugriffsbedingungen nicht erfüllt');
      const { signatureType: type, signatureSchemes: schemes } = optionalInputs(p.OptionalInputs);
      const data = childrenNamed(p.BinaryString, NS.dss, 'Base64Data')[0];
      const digest = Buffer.from(textOf(data) ?? '', 'base64');
      if (digest.length !== 32) throw new SchemaViolation(`BinaryString holds ${digest.length} bytes, not a SHA-256 digest`);
      // The client names the key explicitly: an SMC-B may hold both, and the defaults differ between Konnektor versions.
      const rsa = type === RSA;
      if (!rsa && type !== ECDSA) throw new SchemaViolation(`SignatureType ${type ?? 'missing'}: ${ECDSA} or ${RSA}`);
      if (!rsa && schemes !== undefined) throw new SchemaViolation(`SignatureSchemes ${schemes} with ECDSA (it chooses an RSA padding)`);
      if (rsa && schemes !== 'RSASSA-PSS') throw new SchemaViolation(`SignatureSchemes ${schemes ?? 'missing'} with RSA: RSASSA-PSS gives PS256`);
      const key = rsa ? card.rsa : card.ecc;
      if (!key) throw new CardFault(4000, `no ${rsa ? 'RSA' : 'ECC'} key on the card`);
      signatures.push({ handle: card.handle, signatureType: type, signatureSchemes: schemes, digest: digest.toString('base64') });
      const signature = await signDigest(key.keyPem, digest, rsa);
      return { 'sig:ExternalAuthenticateResponse': { ...OK, 'dss:SignatureObject': { 'dss:Base64Signature': { '@_Type': type, '#text': signature.toString('base64') } } } };
    }
    default:
      throw new SchemaViolation(`unknown operation ${operation}`);
  }
}

/**
 * ExternalAuthenticate's OptionalInputs (conn/SignatureService.xsd): an xs:all of dss:SignatureType?
 * and SIG:SignatureSchemes?, each at most once in any order, nothing else.
 */
function optionalInputs(el: XmlElement | undefined): { signatureType?: string; signatureSchemes?: string } {
  if (!el) return {};
  const out: { signatureType?: string; signatureSchemes?: string } = {};
  for (const k of elements(el)) {
    const field = k.namespaceURI === NS.dss && k.localName === 'SignatureType' ? 'signatureType' : k.namespaceURI === NS.sig && k.localName === 'SignatureSchemes' ? 'signatureSchemes' : undefined;
    if (!field) throw new SchemaViolation(`OptionalInputs: unexpected {${k.namespaceURI}}${k.localName}`);
    if (out[field] !== undefined) throw new SchemaViolation(`OptionalInputs: ${k.localName} twice`);
    out[field] = textOf(k) ?? '';
  }
  if (out.signatureSchemes !== undefined && !SIGNATURE_SCHEMES.includes(out.signatureSchemes)) throw new SchemaViolation(`SignatureSchemes ${out.signatureSchemes} is not one of ${SIGNATURE_SCHEMES.join(', ')}`);
  return out;
}

/** The card's raw signature over a digest it is given, as OpenSSL's pkeyutl makes it (node:crypto always hashes first). */
function signDigest(keyPem: string, digest: Buffer, rsa: boolean): Promise<Buffer> {
  const keyFile = `${fs.mkdtempSync('/tmp/standin-key-')}/key.pem`;
  fs.writeFileSync(keyFile, keyPem, { mode: 0o600 });
  const args = ['pkeyutl', '-sign', '-inkey', keyFile, ...(rsa ? ['-pkeyopt', 'rsa_padding_mode:pss', '-pkeyopt', 'rsa_pss_saltlen:32', '-pkeyopt', 'digest:sha256'] : [])];
  return new Promise((resolve, reject) => {
    const child = execFile('openssl', args, { encoding: 'buffer' }, (err, stdout) => {
      fs.rmSync(keyFile.replace(/\/key\.pem$/, ''), { recursive: true, force: true });
      if (err) reject(err);
      else resolve(stdout);
    });
    child.stdin!.end(digest);
  });
}

/** GERROR:Error (tel/error/TelematikError.xsd): MessageID, Timestamp, one Trace with the code and text. */
function gematikError(code: number, text: string): object {
  return {
    'gerror:MessageID': crypto.randomUUID(),
    'gerror:Timestamp': new Date().toISOString(),
    'gerror:Trace': { 'gerror:EventID': crypto.randomUUID(), 'gerror:Instance': 'standin', 'gerror:LogReference': '1', 'gerror:CompType': 'KON', 'gerror:Code': String(code), 'gerror:Severity': 'Error', 'gerror:ErrorType': 'Technical', 'gerror:ErrorText': text },
  };
}

function fault(res: import('node:http').ServerResponse, code: number, text: string): void {
  const body = { 'soap:Fault': { faultcode: 'soap:Server', faultstring: text, detail: { 'gerror:Error': gematikError(code, text) } } };
  res.writeHead(500, { 'content-type': 'text/xml; charset=UTF-8' }).end(envelope(body));
}
