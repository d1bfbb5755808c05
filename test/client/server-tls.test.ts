import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { main } from '../../src/client/cli';
import type { CliIo } from '../../src/client/cli-commands';
import { serverFetch } from '../../src/client/server-tls';
import { ocspIndexLine, createDevPki, writeDevPki } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { OcspStapler } from '../../src/tls';
import { createTestContext } from '../helpers/context';
import { startOcspResponder, type OcspResponder } from '../helpers/ocsp-responder';
import { freePort } from '../helpers/swtpm';
import { TlsPki } from '../helpers/tls-pki';

/**
 * The reference client towards a server over TLS (docs/requirements.md#reference-client-and-sdk):
 * https required except to loopback, TLS 1.3 at least, the server certificate checked against
 * `--ca` (remembered per server) or TERMINUS_CLIENT_CA instead of the public store, and the
 * server's stapled OCSP answer checked: revoked refuses, none is accepted unless
 * `--require-ocsp`. The servers: Terminus with TLS and stapling, and bare Node https servers
 * stapling a revoked answer, stapling nothing, or speaking at most TLS 1.2.
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'client-tls-'));
const home = path.join(dir, 'home');
const PASSWORD = 'client tls passphrase';
const OWNER = '1-2-DEV-PRAXIS-P256';
let pki: TlsPki;
let responder: OcspResponder;
let terminus: RunningServer;
const bare: https.Server[] = [];
const urls: { revoked?: string; unstapled?: string; tls12?: string } = {};

async function bareServer(cert: { cert: string; key: string }, o: { staple?: Buffer; maxVersion?: 'TLSv1.2' } = {}): Promise<string> {
  const server = https.createServer({ cert: fs.readFileSync(cert.cert, 'utf8') + fs.readFileSync(pki.caPem, 'utf8'), key: fs.readFileSync(cert.key), ...(o.maxVersion ? { maxVersion: o.maxVersion } : {}) }, (_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end('{"resource":"x"}');
  });
  if (o.staple) server.on('OCSPRequest', (_c: Buffer, _i: Buffer, done: (e: Error | null, r?: Buffer) => void) => done(null, o.staple));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  bare.push(server);
  return `https://127.0.0.1:${(server.address() as { port: number }).port}`;
}

beforeAll(async () => {
  pki = new TlsPki(path.join(dir, 'tls'), 'client-tls-ca');
  const ocspPort = await freePort();
  const ocspUrl = `http://127.0.0.1:${ocspPort}`;
  const good = pki.issue('good', { server: true, ocspUrl });
  const revoked = pki.issue('revoked', { server: true, ocspUrl });
  fs.writeFileSync(path.join(dir, 'index.txt'), `${ocspIndexLine(fs.readFileSync(good.cert, 'utf8'))}\n${ocspIndexLine(fs.readFileSync(revoked.cert, 'utf8'), new Date(Date.now() - 60_000))}\n`);
  responder = await startOcspResponder({ index: path.join(dir, 'index.txt'), caCert: pki.caPem, signerCert: pki.caPem, signerKey: pki.caKey, port: ocspPort });

  // Terminus itself, speaking TLS 1.3 with its stapled (good) answer.
  writeDevPki(path.join(dir, 'pki'), createDevPki());
  fs.writeFileSync(path.join(dir, 'tls.crt'), fs.readFileSync(good.cert, 'utf8') + fs.readFileSync(pki.caPem, 'utf8'));
  const port = await freePort();
  const ctx = await createTestContext({ pglite: true, env: { PUBLIC_URL: `https://127.0.0.1:${port}`, GUARD_ENFORCEMENT: 'on', CARD_TRUST_ANCHORS: path.join(dir, 'pki', 'card-ca.pem'), REPOSITORY_OWNERS: OWNER } });
  terminus = await startServer({ ...ctx.config, port, host: '127.0.0.1', tls: { certFile: path.join(dir, 'tls.crt'), keyFile: good.key, ocspStapling: true } }, ctx);

  const stapler = new OcspStapler(pino({ level: 'silent' }), () => new Date());
  await stapler.follow(new crypto.X509Certificate(fs.readFileSync(revoked.cert)), new crypto.X509Certificate(fs.readFileSync(pki.caPem)));
  expect(stapler.status()).toBe('revoked');
  urls.revoked = await bareServer(revoked, { staple: stapler.current() });
  urls.unstapled = await bareServer(good);
  urls.tls12 = await bareServer(good, { maxVersion: 'TLSv1.2' });
}, 120_000);

afterAll(async () => {
  for (const s of bare) s.close();
  await terminus?.close();
  await responder?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: false };
  const vars = { TERMINUS_CLIENT_HOME: home, TERMINUS_CLIENT_PASSWORD: PASSWORD, ...env };
  const saved = Object.fromEntries(Object.keys(vars).concat('TERMINUS_CLIENT_CA').map((k) => [k, process.env[k]]));
  delete process.env.TERMINUS_CLIENT_CA;
  Object.assign(process.env, vars);
  try {
    const code = await main(args, io);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

test('--ca trusts the TI roots instead of the public store: login and search over TLS 1.3, the CA remembered with the server', async () => {
  const untrusted = await cli(['discover', '--server', terminus.url]);
  expect(untrusted.code).toBe(2);
  expect(untrusted.stderr).toMatch(/the server's TLS certificate is not accepted \(SELF_SIGNED_CERT_IN_CHAIN/);
  expect((await cli(['discover', '--server', terminus.url, '--ca', pki.caPem])).code).toBe(0);
  const login = await cli(['login', '--server', terminus.url, '--ca', pki.caPem, '--card', path.join(dir, 'pki', 'card-p256.pem'), '--key', path.join(dir, 'pki', 'card-p256.key.pem')]);
  expect([login.code, login.stderr]).toEqual([0, '']);
  // No --ca now: remembered with the server.
  const search = await cli(['search', 'Schedule', '_count=1']);
  expect([search.code, JSON.parse(search.stdout).resourceType]).toEqual([0, 'Bundle']);
});

test('TERMINUS_CLIENT_CA does the same for any command', async () => {
  expect((await cli(['discover', '--server', terminus.url], { TERMINUS_CLIENT_CA: pki.caPem })).code).toBe(0);
});

test('a server whose stapled OCSP answer says revoked is refused, with the reason', async () => {
  const r = await cli(['discover', '--server', urls.revoked!, '--ca', pki.caPem]);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/the TLS certificate of 127\.0\.0\.1 is revoked \(its stapled OCSP answer says so; serial [0-9A-F]+\) \(ERR_OCSP_STAPLE_REVOKED\)/);
  await expect(serverFetch({ ca: fs.readFileSync(pki.caPem, 'utf8') })(`${urls.revoked}/x`)).rejects.toMatchObject({ cause: { code: 'ERR_OCSP_STAPLE_REVOKED' } });
});

test('no stapled answer is accepted, unless --require-ocsp', async () => {
  const ca = fs.readFileSync(pki.caPem, 'utf8');
  expect((await serverFetch({ ca })(`${urls.unstapled}/x`)).status).toBe(200);
  await expect(serverFetch({ ca, requireOcsp: true })(`${urls.unstapled}/x`)).rejects.toMatchObject({ cause: { code: 'ERR_OCSP_STAPLE_MISSING' } });
  expect((await serverFetch({ ca, requireOcsp: true })(`${terminus.url}/healthz`)).status).toBe(200);
  const r = await cli(['discover', '--server', urls.unstapled!, '--ca', pki.caPem, '--require-ocsp']);
  expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/staples no OCSP answer for its certificate \(required by --require-ocsp\)/)]);
});

test('a server that speaks at most TLS 1.2 is refused: this client requires TLS 1.3', async () => {
  const r = await cli(['discover', '--server', urls.tls12!, '--ca', pki.caPem]);
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/does not speak TLS 1\.3 \(ERR_SSL_[A-Z0-9_]+\): this client requires TLS 1\.3 or higher/);
});

test('plain http only to this machine', async () => {
  const r = await cli(['discover', '--server', 'http://termine.example.org']);
  expect([r.code, r.stderr]).toEqual([2, 'terminus-client: --server http://termine.example.org: use https (plain http is allowed to this machine only: localhost, 127.0.0.0/8, ::1)\n']);
  await expect(serverFetch()('http://termine.example.org/fhir/metadata')).rejects.toThrow(/use https/);
});
