import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as pkijs from 'pkijs';
import { checkOcspAnswer } from '../../src/common/pki/ocsp';
import { ConfigError, loadConfig } from '../../src/config';
import { ocspIndexLine } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { createTestContext } from '../helpers/context';
import { startOcspResponder, type OcspResponder } from '../helpers/ocsp-responder';
import { freePort } from '../helpers/swtpm';
import { TlsPki } from '../helpers/tls-pki';

/**
 * `terminus serve` with TLS_CERT_FILE and TLS_KEY_FILE (docs/requirements.md#configuration): TLS 1.3
 * only, the certificate files replaced on disk served without a restart, and the server
 * certificate's OCSP answer from a real `openssl ocsp` responder stapled (RFC 6066 §8), the last
 * good one kept while the responder is down.
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-tls-'));
const live = { cert: path.join(dir, 'live', 'tls.crt'), key: path.join(dir, 'live', 'tls.key') };
let pki: TlsPki;
let first: { cert: string; key: string };
let second: { cert: string; key: string };
let ocspPort: number;
let responder: OcspResponder | undefined;
let server: RunningServer;
let port: number;

const chain = (c: { cert: string }) => fs.readFileSync(c.cert, 'utf8') + fs.readFileSync(pki.caPem, 'utf8');
const fingerprint = (c: { cert: string }) => new crypto.X509Certificate(fs.readFileSync(c.cert)).fingerprint256;
const startResponder = () =>
  startOcspResponder({ index: path.join(dir, 'index.txt'), caCert: pki.caPem, signerCert: pki.caPem, signerKey: pki.caKey, port: ocspPort });

/** One handshake: the protocol, the server certificate and the stapled OCSP answer (if any). */
function handshake(o: { maxVersion?: tls.SecureVersion } = {}): Promise<{ protocol: string | null; fingerprint: string; stapled?: Buffer }> {
  return new Promise((resolve, reject) => {
    let stapled: Buffer | undefined;
    // requestOCSP is passed on to the TLSSocket (Node's tls.connect), though its type does not list it.
    const options = { host: '127.0.0.1', port, servername: 'localhost', ca: fs.readFileSync(pki.caPem), requestOCSP: true, maxVersion: o.maxVersion };
    const socket = tls.connect(options as tls.ConnectionOptions);
    // Emitted with null when the server staples nothing.
    socket.on('OCSPResponse', (response: Buffer | null) => {
      stapled = response ?? undefined;
    });
    socket.once('secureConnect', () => {
      const result = { protocol: socket.getProtocol(), fingerprint: socket.getPeerX509Certificate()!.fingerprint256, stapled };
      socket.end();
      resolve(result);
    });
    socket.once('error', reject);
  });
}

async function stapledStatus(stapled: Buffer | undefined, leaf: { cert: string }): Promise<string> {
  if (!stapled) return 'none';
  const cert = (file: string) => pkijs.Certificate.fromBER(new Uint8Array(new crypto.X509Certificate(fs.readFileSync(file)).raw));
  return (await checkOcspAnswer(stapled, cert(leaf.cert), cert(pki.caPem), new Date())).status;
}

async function eventually<T>(what: string, probe: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const v = await probe();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  pki = new TlsPki(dir, 'server-ca');
  ocspPort = await freePort();
  first = pki.issue('first', { server: true, ocspUrl: `http://127.0.0.1:${ocspPort}` });
  second = pki.issue('second', { server: true, ocspUrl: `http://127.0.0.1:${ocspPort}` });
  // The second certificate is revoked: once it is served, the staple says so.
  fs.writeFileSync(path.join(dir, 'index.txt'), `${ocspIndexLine(fs.readFileSync(first.cert, 'utf8'))}\n${ocspIndexLine(fs.readFileSync(second.cert, 'utf8'), new Date(Date.now() - 60_000))}\n`);
  responder = await startResponder();
  fs.mkdirSync(path.dirname(live.cert));
  fs.writeFileSync(live.cert, chain(first));
  fs.copyFileSync(first.key, live.key);
  const ctx = await createTestContext({ pglite: true });
  server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1', tls: { certFile: live.cert, keyFile: live.key, ocspStapling: true } }, ctx);
  port = Number(new URL(server.url).port);
}, 120_000);

afterAll(async () => {
  await server?.close();
  await responder?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('speaks TLS 1.3 at an https URL; a client that offers at most TLS 1.2 is refused in the handshake', async () => {
  expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  const h = await handshake();
  expect([h.protocol, h.fingerprint]).toEqual(['TLSv1.3', fingerprint(first)]);
  const health = await new Promise<{ status?: number; body: string }>((resolve, reject) => {
    https.get(`${server.url}/healthz`, { ca: fs.readFileSync(pki.caPem), servername: 'localhost' }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
  expect([health.status, JSON.parse(health.body)]).toEqual([200, { status: 'ok' }]);
  await expect(handshake({ maxVersion: 'TLSv1.2' })).rejects.toThrow(/protocol version|alert|wrong version|handshake/i);
});

test('staples the good OCSP answer of its certificate, checked by the client against the CA', async () => {
  const h = await handshake();
  expect(await stapledStatus(h.stapled, first)).toBe('good');
});

test('while the responder is down the last good answer stays stapled', async () => {
  const before = (await handshake()).stapled;
  await responder!.stop();
  responder = undefined;
  await server.tls!.stapler!.refresh();
  const during = await handshake();
  expect(during.stapled?.equals(before!)).toBe(true);
  expect(await stapledStatus(during.stapled, first)).toBe('good');
  responder = await startResponder();
});

test('new files renamed over the old ones are served within seconds, without a restart; a half-done swap keeps the old pair', async () => {
  // The new key first: for a moment the pair does not match, and the old certificate keeps serving.
  fs.copyFileSync(second.key, `${live.key}.new`);
  fs.renameSync(`${live.key}.new`, live.key);
  await new Promise((r) => setTimeout(r, 2500));
  expect((await handshake()).fingerprint).toBe(fingerprint(first));
  fs.writeFileSync(`${live.cert}.new`, chain(second));
  fs.renameSync(`${live.cert}.new`, live.cert);
  await eventually('the new certificate served', handshake, (h) => h.fingerprint === fingerprint(second));
  // Its own OCSP answer follows it: this one is revoked, and says so.
  const h = await eventually('the new certificate\'s answer stapled', handshake, (x) => x.stapled !== undefined);
  expect(await stapledStatus(h.stapled, second)).toBe('revoked');
});

describe('configuration', () => {
  const base = { DATA_DIR: dir, LOG_LEVEL: 'silent' };
  const errorOf = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return err instanceof ConfigError ? err.message : String(err);
    }
    return 'no error';
  };

  test('the two files go together; stapling needs them; a missing file is named', () => {
    expect(errorOf(() => loadConfig({ ...base, TLS_CERT_FILE: live.cert }))).toBe('TLS_KEY_FILE: TLS_CERT_FILE and TLS_KEY_FILE go together');
    expect(errorOf(() => loadConfig({ ...base, TLS_OCSP_STAPLING: 'on' }))).toMatch(/^TLS_OCSP_STAPLING: needs TLS_CERT_FILE and TLS_KEY_FILE/);
    expect(errorOf(() => loadConfig({ ...base, TLS_CERT_FILE: path.join(dir, 'nope.crt'), TLS_KEY_FILE: live.key }))).toBe(`TLS_CERT_FILE: file not found: ${path.join(dir, 'nope.crt')}`);
  });

  test('an https PUBLIC_URL in production needs TLS here or a trusted terminator in front', () => {
    const production = { ...base, NODE_ENV: 'production', PUBLIC_URL: 'https://termine.example', CARD_TRUST_ANCHORS: pki.caPem, GUARD_KEY_SECRET: 'x'.repeat(40), SMTP_URL: 'smtp://mail.example:587' };
    expect(errorOf(() => loadConfig(production))).toMatch(/^PUBLIC_URL: is https, but this server speaks plain HTTP with NODE_ENV=production/);
    expect(errorOf(() => loadConfig({ ...production, TRUST_PROXY: 'loopback' }))).toBe('no error');
    expect(errorOf(() => loadConfig({ ...production, TLS_CERT_FILE: live.cert, TLS_KEY_FILE: live.key }))).toBe('no error');
  });

  test('a key of another certificate stops the start, naming TLS_KEY_FILE', async () => {
    const ctx = await createTestContext({ pglite: true });
    try {
      const started = startServer({ ...ctx.config, port: 0, host: '127.0.0.1', tls: { certFile: first.cert, keyFile: second.key, ocspStapling: false } }, ctx);
      await expect(started).rejects.toThrow(`TLS_KEY_FILE: the key in ${second.key} does not belong to the first certificate in ${first.cert}`);
    } finally {
      await ctx.db.close();
    }
  });
});
