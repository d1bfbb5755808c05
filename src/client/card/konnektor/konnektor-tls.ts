import crypto from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici';
import { ClientInputError } from '../../input-error';
import { settleConnection } from '../../server-tls';
import { readPkcs12 } from '../p12-card';
import type { KonConfig } from './kon-file';
import { KonnektorError } from './soap';

/**
 * The fetch towards one Konnektor as its `.kon` says: TLS 1.2 or 1.3 (Konnektors in the field speak
 * 1.2; the server gets 1.3 only), the Konnektor's certificate checked against `trustStore` (an
 * end-entity certificate given there must be the one presented; CA certificates replace the public
 * store as anchors), its name against `expectedHost` or the URL's host, the client certificate of
 * `pkcs12` credentials or the `basic` Authorization header; `insecureSkipVerify` (tests only, says
 * the format) checks nothing.
 */
export function konnektorFetch(kon: KonConfig, source: string): typeof fetch {
  if (!kon.url.startsWith('https://')) throw new ClientInputError('konnektor', `${source}: "url" must be https (the Konnektor is reached over TLS; its credentials and the card's signatures never travel in clear)`);
  if (kon.credentials.type === 'system') throw new ClientInputError('konnektor', `${source}: credentials of type system (an operating-system credential store) are not supported on this platform; use basic or pkcs12`);
  const client = kon.credentials.type === 'pkcs12' ? readPkcs12(kon.credentials.data, kon.credentials.password, `credentials.data of ${source}`, 'konnektor') : undefined;
  const certs = kon.trustStore.map((der) => new crypto.X509Certificate(der));
  const pinned = certs.filter((c) => !c.ca);
  const anchors = certs.filter((c) => c.ca);
  const expectedHost = kon.expectedHost;
  const agent = new Agent({
    connect: (options, callback) => {
      const port = Number(options.port) || 443;
      const socket = tls.connect({
        host: options.hostname,
        port,
        servername: net.isIP(options.hostname) ? undefined : options.hostname,
        minVersion: 'TLSv1.2',
        ALPNProtocols: ['http/1.1'],
        // Checked below, where a pinned end-entity certificate can stand in for a chain.
        rejectUnauthorized: false,
        ...(anchors.length > 0 ? { ca: anchors.map((c) => c.toString()) } : {}),
        ...(client ? { key: client.key.export({ type: 'pkcs8', format: 'pem' }), cert: [client.leaf, ...client.chain].map((c) => c.toString()).join('\n') } : {}),
      });
      const done = settleConnection(socket, callback);
      socket.once('secureConnect', () => {
        if (kon.insecureSkipVerify) return done(null);
        const peer = socket.getPeerCertificate();
        const presented = peer?.raw ? new crypto.X509Certificate(peer.raw) : undefined;
        const isPinned = presented !== undefined && pinned.some((p) => p.raw.equals(presented.raw));
        // Only the trust store decides when it has anchors or pins: the public store then counts for nothing.
        const trustedChain = socket.authorized && (anchors.length > 0 || pinned.length === 0);
        if (!isPinned && !trustedChain) {
          return done(new KonnektorError('refused', `the Konnektor's TLS certificate (${presented?.subject.replace(/\n/g, ', ') ?? 'none'}) is not trusted by the .kon trustStore${socket.authorizationError ? ` (${socket.authorizationError})` : ''}`));
        }
        // A pinned certificate stands in for the chain, not for its validity period.
        const now = Date.now();
        if (isPinned && (Date.parse(presented.validFrom) > now || Date.parse(presented.validTo) < now)) {
          return done(new KonnektorError('refused', `the Konnektor's TLS certificate (${presented.subject.replace(/\n/g, ', ')}) pinned in the .kon trustStore is not valid now (${presented.validFrom} to ${presented.validTo})`));
        }
        const name = expectedHost ?? options.hostname;
        const mismatch = tls.checkServerIdentity(name, peer);
        if (mismatch) return done(new KonnektorError('refused', `the Konnektor's TLS certificate is not for ${name}${expectedHost ? ' (expectedHost)' : ''}: ${mismatch.message}`));
        done(null);
      });
      socket.once('error', (err) => done(err));
      return socket;
    },
  });
  const authorization = kon.credentials.type === 'basic' ? `Basic ${Buffer.from(`${kon.credentials.username}:${kon.credentials.password}`).toString('base64')}` : undefined;
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    if (authorization) headers.set('authorization', authorization);
    return undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Parameters<typeof undiciFetch>[1]), headers: headers as never, dispatcher: agent as Dispatcher });
  }) as unknown as typeof fetch;
}
