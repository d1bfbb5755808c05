import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as pkijs from 'pkijs';
import { checkOcspAnswer } from '../src/common/pki/ocsp';
import { ocspIndexLine } from '../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../src/server';
import { createTestContext } from './helpers/context';
import { startOcspResponder, type OcspResponder } from './helpers/ocsp-responder';
import { freePort } from './helpers/swtpm';
import { TlsPki } from './helpers/tls-pki';

/**
 * The shipped deploy/nginx.conf in Debian's nginx, in front of a replica: TLS 1.3 only (a TLS 1.2
 * client is refused), HSTS on every answer, port 80 only redirects (and answers /healthz to
 * loopback), the server certificate's OCSP answer from a real `openssl ocsp` responder
 * stapled, and TLS 1.3 from nginx to the replica, whose certificate nginx verifies. The file is used as shipped; only the addresses and the certificate folder are those
 * of this machine instead of the compose network's.
 */
const NGINX = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' }).stdout.trim();
// .ci/run installs nginx: there a missing one fails the run; a developer machine without it skips.
const describeNginx = NGINX || process.env.CI ? describe : describe.skip;

describeNginx('deploy/nginx.conf in front of a replica', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-nginx-'));
  const tlsDir = path.join(dir, 'tls');
  let pki: TlsPki;
  let responder: OcspResponder;
  let replica: RunningServer;
  let nginx: ChildProcess;
  let httpsPort: number;
  let httpPort: number;
  let leafPem: string;

  beforeAll(async () => {
    pki = new TlsPki(dir, 'edge-ca');
    const ocspPort = await freePort();
    const leaf = pki.issue('edge', { server: true, ocspUrl: `http://127.0.0.1:${ocspPort}` });
    leafPem = fs.readFileSync(leaf.cert, 'utf8');
    fs.writeFileSync(path.join(dir, 'index.txt'), `${ocspIndexLine(leafPem)}\n`);
    responder = await startOcspResponder({ index: path.join(dir, 'index.txt'), caCert: pki.caPem, signerCert: pki.caPem, signerKey: pki.caKey, port: ocspPort });
    fs.mkdirSync(tlsDir);
    fs.writeFileSync(path.join(tlsDir, 'tls.crt'), leafPem + fs.readFileSync(pki.caPem, 'utf8'));
    fs.copyFileSync(leaf.key, path.join(tlsDir, 'tls.key'));
    fs.copyFileSync(pki.caPem, path.join(tlsDir, 'chain.pem'));
    // The replica's own certificate for the hop behind nginx (deploy/make-env's tls/internal/).
    const internalPki = new TlsPki(path.join(dir, 'internal-pki'), 'internal-ca');
    const internal = internalPki.issue('terminus', { server: true, san: 'DNS:terminus,DNS:terminus-1,DNS:terminus-2' });
    fs.mkdirSync(path.join(tlsDir, 'internal'));
    fs.copyFileSync(internalPki.caPem, path.join(tlsDir, 'internal', 'internal-ca.pem'));

    [httpsPort, httpPort] = [await freePort(), await freePort()];
    const ctx = await createTestContext({ pglite: true, env: { PUBLIC_URL: `https://localhost:${httpsPort}` } });
    replica = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1', tls: { certFile: internal.cert, keyFile: internal.key, ocspStapling: false } }, ctx);
    expect(replica.url).toMatch(/^https:/);
    const shipped = fs.readFileSync(path.join(__dirname, '..', 'deploy', 'nginx.conf'), 'utf8');
    const site = shipped
      .replace(/server terminus-1:8080;\s*server terminus-2:8080;/, `server 127.0.0.1:${new URL(replica.url).port};`)
      .replace('listen 80;', `listen 127.0.0.1:${httpPort};`)
      .replace('listen 443 ssl;', `listen 127.0.0.1:${httpsPort} ssl;`)
      .replaceAll('/etc/nginx/tls/', `${tlsDir}/`);
    const directives = site.split('\n').filter((l) => !l.trim().startsWith('#')).join('\n');
    expect(directives).not.toMatch(/terminus-\d|\/etc\/nginx\/tls|listen (80|443)\b/);
    // Nothing is passed on in clear: every hop to a replica is https.
    expect(directives).not.toMatch(/proxy_pass http:/);
    fs.writeFileSync(path.join(dir, 'site.conf'), site);
    fs.writeFileSync(
      path.join(dir, 'nginx.conf'),
      [
        'user root;',
        'worker_processes 1;',
        `pid ${dir}/nginx.pid;`,
        `error_log ${dir}/error.log warn;`,
        'events {}',
        'http {',
        '  access_log off;',
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t};`),
        `  include ${dir}/site.conf;`,
        '}',
      ].join('\n'),
    );
    nginx = spawn(NGINX || 'nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    nginx.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const deadline = Date.now() + 60_000;
    while (!(await listening(httpsPort))) {
      if (nginx.exitCode !== null) throw new Error(`nginx exited with ${nginx.exitCode}: ${stderr}${fs.readFileSync(path.join(dir, 'error.log'), 'utf8')}`);
      if (Date.now() > deadline) throw new Error(`nginx did not listen: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);

  afterAll(async () => {
    if (nginx && nginx.exitCode === null) {
      await new Promise<void>((resolve) => {
        nginx.once('exit', () => resolve());
        nginx.kill('SIGTERM');
      });
    }
    await replica?.close();
    await responder?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function listening(port: number): Promise<boolean> {
    return new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
  }

  function handshake(o: { maxVersion?: tls.SecureVersion } = {}): Promise<{ protocol: string | null; stapled?: Buffer }> {
    return new Promise((resolve, reject) => {
      let stapled: Buffer | undefined;
      const options = { host: '127.0.0.1', port: httpsPort, servername: 'localhost', ca: fs.readFileSync(pki.caPem), requestOCSP: true, maxVersion: o.maxVersion };
      const socket = tls.connect(options as tls.ConnectionOptions);
      // Emitted with null when nginx staples nothing (yet).
      socket.on('OCSPResponse', (r: Buffer | null) => (stapled = r ?? undefined));
      socket.once('secureConnect', () => {
        resolve({ protocol: socket.getProtocol(), stapled });
        socket.end();
      });
      socket.once('error', reject);
    });
  }

  function get(url: string): Promise<{ status?: number; headers: http.IncomingHttpHeaders; body: string }> {
    return new Promise((resolve, reject) => {
      const client = url.startsWith('https:') ? https : http;
      client
        .get(url, { ca: fs.readFileSync(pki.caPem), servername: 'localhost', headers: { accept: 'application/fhir+json' } }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
        })
        .on('error', reject);
    });
  }

  test('TLS 1.3 only: a TLS 1.2 client is refused in the handshake', async () => {
    expect((await handshake()).protocol).toBe('TLSv1.3');
    await expect(handshake({ maxVersion: 'TLSv1.2' })).rejects.toThrow();
  });

  test('the replica answers through it with HSTS; port 80 only redirects to https', async () => {
    const metadata = await get(`https://127.0.0.1:${httpsPort}/fhir/metadata`);
    expect([metadata.status, JSON.parse(metadata.body).resourceType]).toEqual([200, 'CapabilityStatement']);
    expect(metadata.headers['strict-transport-security']).toBe('max-age=63072000; includeSubDomains');
    const refused = await get(`https://127.0.0.1:${httpsPort}/fhir/Patient`);
    expect(refused.headers['strict-transport-security']).toBe('max-age=63072000; includeSubDomains');
    const plain = await get(`http://127.0.0.1:${httpPort}/fhir/Slot?status=free`);
    expect([plain.status, plain.headers.location]).toEqual([301, `https://127.0.0.1/fhir/Slot?status=free`]);
    expect(plain.body).not.toMatch(/resourceType/);
    // The container's health check: loopback only, through to a replica.
    expect(JSON.parse((await get(`http://127.0.0.1:${httpPort}/healthz`)).body)).toEqual({ status: 'ok' });
  });

  test('staples the certificate\'s good OCSP answer, checked against the issuer', async () => {
    // nginx asks the responder on the first handshake that wants an answer and staples from then on.
    const deadline = Date.now() + 60_000;
    let stapled: Buffer | undefined;
    while (!stapled && Date.now() < deadline) {
      stapled = (await handshake()).stapled;
      if (!stapled) await new Promise((r) => setTimeout(r, 250));
    }
    const cert = (pem: string) => pkijs.Certificate.fromBER(new Uint8Array(new crypto.X509Certificate(pem).raw));
    expect(stapled).toBeDefined();
    expect((await checkOcspAnswer(stapled!, cert(leafPem), cert(fs.readFileSync(pki.caPem, 'utf8')), new Date())).status).toBe('good');
  });
});
