import crypto from 'node:crypto';
import http from 'node:http';
import { Duplex } from 'node:stream';
import {
  decapsulate,
  decryptFrame,
  deriveK1,
  deriveK2,
  encapsulate,
  encryptFrame,
  FRAME_HEADER_BYTES,
  FRAME_VERSION,
  generateHybridKeyPair,
  MODE_REQUEST,
  MODE_RESPONSE,
  open,
  parseFrameHeader,
  seal,
  sha256,
} from '../common/asl/asl-crypto';
import { bytesOf, decodeMap, encodeCbor, messageTypeIs, pointOf } from '../common/asl/asl-messages';
import type { HttpRequest, HttpResponse, HttpTransport } from './transport';

const CBOR = 'application/cbor';
const OCTETS = 'application/octet-stream';
/** The SDK's rule: server keys live at most 30 days. */
const MAX_KEY_LIFETIME_SEC = 30 * 86400;

/** The server answered an ASL error object (`ErrorCode`, `ErrorMessage`) or something that is no ASL answer. */
export class AslClientError extends Error {
  constructor(
    readonly status: number,
    readonly code: number | undefined,
    message: string,
  ) {
    super(`ASL: ${status}${code !== undefined ? ` code ${code}` : ''}: ${message}`);
  }
}

interface Session {
  cid: string;
  keyId: Buffer;
  c2s: Buffer;
  s2c: Buffer;
  requestCounter: bigint;
  encryptionCounter: bigint;
}

/**
 * The client side of the additional security layer (gematik's wire format,
 * docs/requirements.md#additional-security-layer-asl): the handshake M1-M4 with the server's
 * signed keys checked against its CertData (certificate hash, ES256 signature raw or DER, key
 * lifetime at most 30 days and not expired), then each request as one encrypted HTTP/1.1 message and its answer decrypted and parsed by Node's HTTP parser. An
 * unknown connection or key id (the server lost the session) runs the handshake again once.
 */
export class AslChannel {
  private session?: Session;
  private handshaking?: Promise<Session>;

  constructor(
    private readonly o: {
      /** The server's public origin (PUBLIC_URL). */
      origin: string;
      /** A transport that carries bytes (`body` as a Buffer, `bytes` in the answer). */
      transport: HttpTransport;
      /** The data frames' environment byte: 0 test, 1 production (PU). */
      env: 0 | 1;
      now: () => number;
    },
  ) {}

  /** Sends `req` (an absolute URL under the origin) through the tunnel; the inner response as an HttpResponse. */
  async send(req: HttpRequest): Promise<HttpResponse> {
    try {
      return await this.exchange(await this.established(), req);
    } catch (err) {
      // The session is gone on the server (restart without the store, expiry): once more from M1.
      if (!(err instanceof AslClientError) || (err.code !== 8 && err.code !== 9)) throw err;
      this.session = undefined;
      return this.exchange(await this.established(), req);
    }
  }

  /** Forgets the session (the next request runs a new handshake). */
  reset(): void {
    this.session = undefined;
  }

  private established(): Promise<Session> {
    if (this.session) return Promise.resolve(this.session);
    this.handshaking ??= this.handshake().then(
      (s) => {
        this.session = s;
        this.handshaking = undefined;
        return s;
      },
      (err: unknown) => {
        this.handshaking = undefined;
        throw err;
      },
    );
    return this.handshaking;
  }

  private async handshake(): Promise<Session> {
    const own = generateHybridKeyPair();
    const m1 = encodeCbor({ MessageType: 'M1', ECDH_PK: own.publicKeys.ecdh, 'ML-KEM-768_PK': Buffer.from(own.publicKeys.mlkem) });
    const first = await this.post('/ASL', CBOR, m1);
    const cid = first.headers['svc-asl-cid'];
    if (!cid || !/^\/[A-Za-z0-9/-]{1,199}$/.test(cid)) throw new AslClientError(first.status, undefined, 'the server named no valid SVC-ASL-CID');
    const m2 = first.bytes!;
    const msg2 = decodeMap(m2, 'M2');
    messageTypeIs(msg2, 'M2');
    const ssE = decapsulate(own.privateKeys, pointOf(msg2, 'ECDH_ct'), bytesOf(msg2, 'ML-KEM-768_ct'));
    const k1 = deriveK1(ssE);
    const signedKeys = open(k1.s2c, bytesOf(msg2, 'AEAD_ct'));
    if (!signedKeys) throw new AslClientError(200, 3, 'M2 does not decrypt');
    const server = await this.verifiedServerKeys(decodeMap(signedKeys, 'signed keys'));
    const enc = encapsulate(server);
    const k2 = deriveK2(ssE, enc.sharedSecret);
    const aeadCt = seal(k1.c2s, encodeCbor({ ECDH_ct: enc.ecdhCt, 'ML-KEM-768_ct': Buffer.from(enc.mlkemCt), ERP: false, ESO: false }));
    const m3 = encodeCbor({ MessageType: 'M3', AEAD_ct: aeadCt, AEAD_ct_key_confirmation: seal(k2.c2sKeyConfirmation, sha256(m1, m2, aeadCt)) });
    const m4 = decodeMap((await this.post(cid, CBOR, m3)).bytes!, 'M4');
    messageTypeIs(m4, 'M4');
    const confirmation = open(k2.s2cKeyConfirmation, bytesOf(m4, 'AEAD_ct_key_confirmation'));
    if (!confirmation || !confirmation.equals(sha256(m1, m2, m3))) throw new AslClientError(200, 5, 'the server key confirmation does not match the transcript');
    return { cid, keyId: k2.keyId, c2s: k2.c2sAppData, s2c: k2.s2cAppData, requestCounter: 0n, encryptionCounter: 0n };
  }

  /** The signed static keys of M2, checked against the CertData the server publishes for them. */
  private async verifiedServerKeys(s: Record<string, unknown>): Promise<{ ecdh: ReturnType<typeof pointOf>; mlkem: Buffer }> {
    const signedPubKeys = bytesOf(s, 'signed_pub_keys');
    const certHash = bytesOf(s, 'cert_hash', 32);
    const cdv = s.cdv;
    if (typeof cdv !== 'number' || !Number.isInteger(cdv) || cdv < 0) throw new AslClientError(200, 2, 'M2 names no cdv');
    const certData = await this.o.transport({ method: 'GET', url: `${this.o.origin}/CertData.${certHash.toString('hex')}-${cdv}`, headers: { accept: CBOR } });
    if (certData.status !== 200 || !certData.bytes) throw new AslClientError(certData.status, undefined, 'the CertData of the server keys cannot be fetched');
    const cert = bytesOf(decodeMap(certData.bytes, 'CertData'), 'cert');
    if (!sha256(cert).equals(certHash)) throw new AslClientError(200, 100, 'cert_hash is not the hash of the CertData certificate');
    const signature = bytesOf(s, 'signature-ES256');
    const key = new crypto.X509Certificate(cert).publicKey;
    const ok = crypto.verify('sha256', signedPubKeys, { key, dsaEncoding: signature.length === 64 ? 'ieee-p1363' : 'der' }, signature);
    if (!ok) throw new AslClientError(200, 100, 'key signature invalid');
    const keys = decodeMap(signedPubKeys, 'signed_pub_keys');
    const { iat, exp } = keys;
    if (typeof iat !== 'number' || typeof exp !== 'number' || exp <= this.o.now() || exp - iat > MAX_KEY_LIFETIME_SEC) throw new AslClientError(200, 100, 'the server keys are expired or live longer than 30 days');
    return { ecdh: pointOf(keys, 'ECDH_PK'), mlkem: bytesOf(keys, 'ML-KEM-768_PK') };
  }

  private async exchange(s: Session, req: HttpRequest): Promise<HttpResponse> {
    s.requestCounter += 1n;
    s.encryptionCounter += 1n;
    const requestCounter = s.requestCounter;
    const frame = encryptFrame(s.c2s, { version: FRAME_VERSION, env: this.o.env, mode: MODE_REQUEST, requestCounter, keyId: s.keyId }, s.encryptionCounter, serializeRequest(req));
    const res = await this.post(s.cid, OCTETS, frame);
    const answer = res.bytes!;
    if (answer.length <= FRAME_HEADER_BYTES + 28) throw new AslClientError(res.status, 6, 'the response frame is too short');
    const header = parseFrameHeader(answer);
    if (header.mode !== MODE_RESPONSE || header.requestCounter !== requestCounter || !header.keyId.equals(s.keyId)) throw new AslClientError(res.status, 7, 'the response frame answers another request');
    const plaintext = decryptFrame(s.s2c, answer);
    if (!plaintext) throw new AslClientError(res.status, 3, 'the response frame does not decrypt');
    return parseResponse(plaintext);
  }

  /** An outer POST; an ASL error object (or any other non-200) becomes an AslClientError. */
  private async post(path: string, type: string, body: Buffer): Promise<HttpResponse> {
    const res = await this.o.transport({ method: 'POST', url: `${this.o.origin}${path}`, headers: { 'content-type': type, accept: type }, body });
    if (res.status === 200 && res.bytes) return res;
    let code: number | undefined;
    let message = res.text.slice(0, 200);
    if ((res.headers['content-type'] ?? '').startsWith(CBOR) && res.bytes) {
      try {
        const e = decodeMap(res.bytes, 'error');
        code = typeof e.ErrorCode === 'number' ? e.ErrorCode : undefined;
        message = String(e.ErrorMessage ?? '');
      } catch {
        // not an error object: the status says enough
      }
    }
    throw new AslClientError(res.status, code, message);
  }
}

/** `METHOD /path?query HTTP/1.1`, Host, the headers, Content-Length, the body. */
export function serializeRequest(req: HttpRequest): Buffer {
  const url = new URL(req.url);
  const body = req.body === undefined ? Buffer.alloc(0) : Buffer.from(req.body);
  const lines = [`${req.method.toUpperCase()} ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`];
  for (const [k, v] of Object.entries(req.headers)) if (!['host', 'content-length', 'connection', 'transfer-encoding'].includes(k.toLowerCase())) lines.push(`${k}: ${v}`);
  if (body.length > 0 || !['GET', 'HEAD'].includes(req.method.toUpperCase())) lines.push(`content-length: ${body.length}`);
  lines.push('connection: close');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), body]);
}

/** A raw HTTP/1.1 response parsed by Node's own client parser (a stream stands in for the socket). */
export function parseResponse(raw: Buffer): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const socket = new Duplex({
      read() {},
      write(_chunk, _enc, cb) {
        cb();
      },
    });
    const req = http.request({ createConnection: () => socket as never, host: 'asl.invalid', path: '/', method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
        const text = bytes.toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers, text, json, bytes });
      });
    });
    req.on('error', reject);
    req.end();
    socket.push(raw);
    socket.push(null);
  });
}
