import crypto from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import * as pkijs from 'pkijs';
import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici';
import { checkOcspAnswer } from '../common/pki/ocsp';
import { ClientInputError } from './pem-files';

/**
 * How the client trusts the server it books with: https (plain http only to this machine),
 * TLS 1.3 at least, the server certificate checked against `ca` (the TI's roots, PEM) instead of
 * Node's public store when given, host name and validity as Node checks them, and the OCSP answer
 * the server staples checked: revoked refuses; none at all is accepted unless `requireOcsp`.
 */
export interface ServerTrust {
  /** PEM CA certificates that replace the public store for the server. */
  ca?: string;
  /** Refuse a server that staples no OCSP answer. */
  requireOcsp?: boolean;
}

/** TLS 1.3 or higher towards the server (gemSpec_ZETA); a Konnektor is reached by its own settings. */
const MIN_VERSION: tls.SecureVersion = 'TLSv1.3';

/** The stapled answer is missing (with requireOcsp), says revoked or unknown, or fails its checks. */
export class StapledAnswerRefused extends Error {
  constructor(
    readonly code: 'ERR_OCSP_STAPLE_MISSING' | 'ERR_OCSP_STAPLE_REVOKED' | 'ERR_OCSP_STAPLE_INVALID',
    message: string,
  ) {
    super(message);
  }
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Plain http only to this machine: anything else carries tokens and health data in clear. */
export function requireSecureOrigin(server: string): void {
  const url = new URL(server);
  if (url.protocol === 'https:') return;
  const host = url.hostname;
  const loopback = LOOPBACK_NAMES.has(host) || (net.isIPv4(host) && host.startsWith('127.'));
  if (url.protocol === 'http:' && loopback) return;
  throw new ClientInputError('server', `${url.origin}: use https (plain http is allowed to this machine only: localhost, 127.0.0.0/8, ::1)`);
}

/**
 * A fetch for the server under `trust`: one keep-alive connection pool whose connections are made
 * here, so every new connection's TLS version, certificate and stapled OCSP answer are checked
 * before a byte of a request is sent.
 */
export function serverFetch(trust: ServerTrust = {}): typeof fetch {
  const agent = new Agent({ connect: connector(trust) });
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
    requireSecureOrigin(url);
    return undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent as Dispatcher });
  }) as unknown as typeof fetch;
}

type Connect = NonNullable<ConstructorParameters<typeof Agent>[0]>['connect'];

/**
 * The end of an undici connector's own checks: the socket handed on once they pass, or destroyed
 * with the first error; whatever comes later (an error event after a refusal) is ignored.
 */
export function settleConnection(socket: tls.TLSSocket, callback: (...args: [null, tls.TLSSocket] | [Error, null]) => void): (err: Error | null) => void {
  let settled = false;
  return (err) => {
    if (settled) return;
    settled = true;
    if (err) {
      socket.destroy();
      callback(err, null);
    } else callback(null, socket);
  };
}

function connector(trust: ServerTrust): Connect {
  return (options, callback) => {
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
    if (options.protocol !== 'https:') {
      const socket = net.connect({ host: options.hostname, port });
      socket.once('connect', () => callback(null, socket));
      socket.once('error', (err) => callback(err, null));
      return socket;
    }
    const servername = options.servername || (net.isIP(options.hostname) ? undefined : options.hostname);
    // requestOCSP is an option of the TLSSocket that tls.connect makes, though its type does not list it.
    const tlsOptions = { host: options.hostname, port, servername, ALPNProtocols: ['http/1.1'], minVersion: MIN_VERSION, ...(trust.ca ? { ca: trust.ca } : {}), requestOCSP: true };
    const socket = tls.connect(tlsOptions as tls.ConnectionOptions);
    let stapled: Buffer | undefined;
    const done = settleConnection(socket, callback);
    // Emitted with null when the server staples nothing.
    socket.on('OCSPResponse', (answer: Buffer | null) => {
      stapled = answer ?? undefined;
    });
    socket.once('secureConnect', () => {
      stapleAccepted(socket, stapled, trust, options.hostname).then(() => done(null), done);
    });
    socket.once('error', done);
    return socket;
  };
}

/** The stapled answer about the certificate the server presented, checked against its issuer. */
async function stapleAccepted(socket: tls.TLSSocket, stapled: Buffer | undefined, trust: ServerTrust, host: string): Promise<void> {
  if (!stapled) {
    if (trust.requireOcsp) throw new StapledAnswerRefused('ERR_OCSP_STAPLE_MISSING', `${host} staples no OCSP answer for its certificate (required by --require-ocsp)`);
    return;
  }
  const peer = socket.getPeerCertificate(true);
  const issuerRaw = peer.issuerCertificate && peer.issuerCertificate !== peer ? peer.issuerCertificate.raw : undefined;
  if (!issuerRaw) throw new StapledAnswerRefused('ERR_OCSP_STAPLE_INVALID', `${host} stapled an OCSP answer, but its certificate's issuer is unknown here`);
  const cert = (raw: Buffer) => pkijs.Certificate.fromBER(new Uint8Array(raw));
  let status: string;
  try {
    status = (await checkOcspAnswer(stapled, cert(peer.raw), cert(issuerRaw), new Date())).status;
  } catch (err) {
    throw new StapledAnswerRefused('ERR_OCSP_STAPLE_INVALID', `the OCSP answer ${host} stapled fails its checks: ${(err as Error).message}`);
  }
  if (status === 'revoked') throw new StapledAnswerRefused('ERR_OCSP_STAPLE_REVOKED', `the TLS certificate of ${host} is revoked (its stapled OCSP answer says so; serial ${new crypto.X509Certificate(peer.raw).serialNumber})`);
  if (status !== 'good') throw new StapledAnswerRefused('ERR_OCSP_STAPLE_INVALID', `the OCSP answer ${host} stapled says its certificate is ${status}`);
}
