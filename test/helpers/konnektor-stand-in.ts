import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type tls from 'node:tls';
import { XMLBuilder } from 'fast-xml-parser';
import { childrenNamed, parseXml, textOf, type XmlElement } from '../../src/common/xml';
import { KON_NS, KON_SERVICES } from '../../src/client/card/konnektor/namespaces';

// A Konnektor stand-in, written from gematik's WSDLs and XSDs (api-telematik conn/): no Konnektor
// can run here. A real SOAP 1.1 server over TLS (client certificate or basic auth) that checks what
// a Konnektor's schema validation would (namespaces, element order, SOAPAction), with SMC-Bs whose
// keys sign as a card does: a given SHA-256 digest, ECDSA answered DER-encoded, RSA with PSS.

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
  /** The base its service directory names (a Konnektor behind NAT names addresses the client cannot reach). */
  advertise?: string;
}

export interface StandIn {
  url: string;
  calls: Record<string, number>;
  options: StandInOptions;
  close(): Promise<void>;
}

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });
const xmlns = Object.fromEntries(Object.entries(KON_NS).map(([p, u]) => [`@_xmlns:${p}`, u]));
const envelope = (body: object) => builder.build({ 'soap:Envelope': { ...xmlns, 'soap:Body': body } });
const OK = { 'conn:Status': { 'conn:Result': 'OK' } };

class SchemaViolation extends Error {}

export async function startKonnektorStandIn(options: StandInOptions): Promise<StandIn> {
  const calls: Record<string, number> = {};
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
          const service = /^\/ws\/(\w+)$/.exec(req.url ?? '')?.[1] as keyof typeof KON_SERVICES | undefined;
          if (req.method !== 'POST' || !service || !(service in KON_SERVICES)) return res.writeHead(404).end();
          try {
            const body = soapBody(Buffer.concat(chunks).toString('utf8'));
            const operation = body.localName;
            const action = (KON_SERVICES[service].actions as Record<string, string>)[operation];
            if (!action || req.headers.soapaction !== `"${action}"`) throw new SchemaViolation(`SOAPAction ${req.headers.soapaction} does not name ${service}.${operation}`);
            calls[operation] = (calls[operation] ?? 0) + 1;
            if (options.fault?.operation === operation) return fault(res, options.fault.code, options.fault.text);
            const answer = await handle(options, operation, body);
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
          { '@_Name': 'EventService', 'si:Versions': { 'si:Version': [version('7.2.0', KON_NS.evt, 'EventService')] } },
          { '@_Name': 'CardService', 'si:Versions': { 'si:Version': [version('8.1.2', KON_NS.card, 'CardService')] } },
          { '@_Name': 'CertificateService', 'si:Versions': { 'si:Version': [version('6.0.0', KON_NS.cert, 'CertificateService'), version('6.0.1', KON_NS.cert, 'CertificateService')] } },
          // An older line the client must not pick for ExternalAuthenticate with ECDSA.
          { '@_Name': 'AuthSignatureService', 'si:Versions': { 'si:Version': [version('7.4.1', KON_NS.sig, 'AuthSignatureService'), version('7.3.0', 'http://ws.gematik.de/conn/SignatureService/v7.3', 'AuthSignatureServiceOld')] } },
        ],
      },
    },
  });
}

function soapBody(text: string): XmlElement {
  const env = parseXml(text, 'the request', 1024 * 1024).documentElement!;
  if (env.namespaceURI !== KON_NS.soap || env.localName !== 'Envelope') throw new SchemaViolation('not a SOAP 1.1 envelope');
  const body = childrenNamed(env, KON_NS.soap, 'Body')[0];
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
    [KON_NS.conn, 'MandantId'],
    [KON_NS.conn, 'ClientSystemId'],
    [KON_NS.conn, 'WorkplaceId'],
    [KON_NS.conn, 'UserId?'],
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

async function handle(o: StandInOptions, operation: string, body: XmlElement): Promise<object> {
  switch (operation) {
    case 'GetCards': {
      if (body.namespaceURI !== KON_NS.evt) throw new SchemaViolation('GetCards is not in the EventService 7.2 namespace');
      const p = sequence(body, [
        [KON_NS.cctx, 'Context'],
        [KON_NS.cardcmn, 'CtId?'],
        [KON_NS.cardcmn, 'SlotId?'],
        [KON_NS.cardcmn, 'CardType?'],
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
        [KON_NS.conn, 'CardHandle'],
        [KON_NS.cctx, 'Context'],
        [KON_NS.cert, 'CertRefList'],
        [KON_NS.cert, 'Crypt?'],
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
        [KON_NS.cctx, 'Context'],
        [KON_NS.conn, 'CardHandle'],
        [KON_NS.cardcmn, 'PinTyp'],
      ]);
      checkContext(o, p.Context);
      const card = cardOf(o, textOf(p.CardHandle));
      if (textOf(p.PinTyp) !== 'PIN.SMC') throw new SchemaViolation(`PinTyp ${textOf(p.PinTyp)} for an SMC-B`);
      return { 'card:GetPinStatusResponse': { ...OK, 'card:PinStatus': card.pin ?? 'VERIFIED', ...(card.pin === 'VERIFIABLE' ? { 'card:LeftTries': '3' } : {}) } };
    }
    case 'ExternalAuthenticate': {
      if (body.namespaceURI !== KON_NS.sig) throw new SchemaViolation('ExternalAuthenticate is not in the SignatureService 7.4 namespace');
      const p = sequence(body, [
        [KON_NS.conn, 'CardHandle'],
        [KON_NS.cctx, 'Context'],
        [KON_NS.sig, 'OptionalInputs?'],
        [KON_NS.sig, 'BinaryString'],
      ]);
      checkContext(o, p.Context);
      const card = cardOf(o, textOf(p.CardHandle));
      if ((card.pin ?? 'VERIFIED') !== 'VERIFIED') throw new CardFault(4085, 'Zugriffsbedingungen nicht erfüllt');
      const type = p.OptionalInputs ? textOf(childrenNamed(p.OptionalInputs, KON_NS.dss, 'SignatureType')[0]) : undefined;
      const data = childrenNamed(p.BinaryString, KON_NS.dss, 'Base64Data')[0];
      const digest = Buffer.from(textOf(data) ?? '', 'base64');
      if (digest.length !== 32) throw new SchemaViolation(`BinaryString holds ${digest.length} bytes, not a SHA-256 digest`);
      const rsa = type === 'urn:ietf:rfc:3447';
      if (!rsa && type !== 'urn:bsi:tr:03111:ecdsa') throw new SchemaViolation(`SignatureType ${type}`);
      const key = rsa ? card.rsa : card.ecc;
      if (!key) throw new CardFault(4000, `no ${rsa ? 'RSA' : 'ECC'} key on the card`);
      const signature = await signDigest(key.keyPem, digest, rsa);
      return { 'sig:ExternalAuthenticateResponse': { ...OK, 'dss:SignatureObject': { 'dss:Base64Signature': { '@_Type': type, '#text': signature.toString('base64') } } } };
    }
    default:
      throw new SchemaViolation(`unknown operation ${operation}`);
  }
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

function fault(res: import('node:http').ServerResponse, code: number, text: string): void {
  const body = {
    'soap:Fault': {
      faultcode: 'soap:Server',
      faultstring: text,
      detail: {
        'gerror:Error': {
          'gerror:MessageID': crypto.randomUUID(),
          'gerror:Timestamp': new Date().toISOString(),
          'gerror:Trace': { 'gerror:EventID': crypto.randomUUID(), 'gerror:Instance': 'standin', 'gerror:LogReference': '1', 'gerror:CompType': 'KON', 'gerror:Code': String(code), 'gerror:Severity': 'Error', 'gerror:ErrorType': 'Technical', 'gerror:ErrorText': text },
        },
      },
    },
  };
  res.writeHead(500, { 'content-type': 'text/xml; charset=UTF-8' }).end(envelope(body));
}
