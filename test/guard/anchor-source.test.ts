import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { Agent, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import type { AppContext } from '../../src/context';
import { createLogger } from '../../src/logger';
import { anchorSource } from '../../src/guard/pki/anchor-source';
import { trustListRefreshes } from '../../src/server-lib/metrics';
import { createCardCa } from '../../src/guard/pki/dev-pki';
import { TlsPki } from '../helpers/tls-pki';

// Attestation roots published as a PEM bundle at an https URL: read on first use, kept under
// DATA_DIR, and the kept copy used when the host is down.

let dir: string;
let pki: TlsPki;
let previous: Dispatcher;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'anchor-source-'));
  pki = new TlsPki(path.join(dir, 'pki'));
  // Node's fetch trusts the test CA through undici's global dispatcher (the test's only hook).
  previous = getGlobalDispatcher();
  setGlobalDispatcher(new Agent({ connect: { ca: fs.readFileSync(pki.caPem) } }));
});
afterAll(() => {
  setGlobalDispatcher(previous);
  fs.rmSync(dir, { recursive: true, force: true });
});

const ctxWith = (dataDir: string) => ({ config: { dataDir }, now: () => new Date(), logger: createLogger(process.env.T_LOG ?? 'silent') }) as unknown as AppContext;

async function serve(body: string): Promise<{ url: string; close: () => Promise<void> }> {
  const { cert, key } = pki.issue('roots-host', { server: true });
  const server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (_req, res) => res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(body));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/roots.pem`, close: () => new Promise((r) => server.close(() => r())) };
}

test('an https PEM bundle is read on first use and kept; the kept copy serves while the host is down', async () => {
  const roots = [createCardCa({ commonName: 'Root A' }), createCardCa({ commonName: 'Root B' })];
  const der = roots.map((r) => new crypto.X509Certificate(r.certPem).raw);
  const host = await serve(roots.map((r) => r.certPem).join('\n'));
  const dataDir = path.join(dir, 'data');
  try {
    expect(await anchorSource(ctxWith(dataDir), 'PLATFORM_B_TRUST_ANCHORS', host.url)()).toEqual(der);
    expect(fs.existsSync(path.join(dataDir, 'trust', 'platform_b_trust_anchors.pem'))).toBe(true);
  } finally {
    await host.close();
  }
  expect(await anchorSource(ctxWith(dataDir), 'PLATFORM_B_TRUST_ANCHORS', host.url)()).toEqual(der);
});

test('a bundle without certificates is refused, not taken as "no roots" over a good one', async () => {
  const good = createCardCa({ commonName: 'Root C' });
  const dataDir = path.join(dir, 'data-empty');
  const first = await serve(good.certPem);
  try {
    await anchorSource(ctxWith(dataDir), 'TPM_EK_TRUST_ANCHORS', first.url)();
  } finally {
    await first.close();
  }
  const empty = await serve('<html>maintenance</html>');
  try {
    expect(await anchorSource(ctxWith(dataDir), 'TPM_EK_TRUST_ANCHORS', empty.url)()).toEqual([new crypto.X509Certificate(good.certPem).raw]);
    expect(await anchorSource(ctxWith(path.join(dir, 'data-none')), 'TPM_EK_TRUST_ANCHORS', empty.url)()).toEqual([]);
  } finally {
    await empty.close();
  }
});

test('a host down at the first use with nothing kept: no roots, a warning and a counted failure, then the roots once the host is back', async () => {
  const root = createCardCa({ commonName: 'Root E' });
  const dataDir = path.join(dir, 'data-later');
  const lines: { msg: string; list?: string; code?: string }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  let now = Date.parse('2026-06-01T10:00:00Z');
  const ctx = { config: { dataDir }, now: () => new Date(now), logger } as unknown as AppContext;
  const failures = async () => (await trustListRefreshes.get()).values.find((v) => v.labels.list === 'PLATFORM_A_TRUST_ANCHORS' && v.labels.outcome === 'unreachable')?.value ?? 0;
  // A port nothing listens on: taken from a server that is closed again.
  const gone = await serve('');
  await gone.close();
  const before = await failures();
  const later = anchorSource(ctx, 'PLATFORM_A_TRUST_ANCHORS', gone.url);
  expect(await later()).toEqual([]);
  expect(await failures()).toBe(before + 1);
  expect(lines).toContainEqual(expect.objectContaining({ list: 'PLATFORM_A_TRUST_ANCHORS', code: 'unreachable', msg: 'trust list refresh failed: no list in use' }));
  // Within the retry interval the source is not read again on every use.
  expect(await later()).toEqual([]);
  expect(await failures()).toBe(before + 1);

  // The host is back (same URL); past the retry interval the next use reads it.
  const port = new URL(gone.url).port;
  const { cert, key } = pki.issue('roots-host', { server: true });
  const back = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (_req, res) => res.writeHead(200).end(root.certPem));
  await new Promise<void>((r) => back.listen(Number(port), '127.0.0.1', r));
  try {
    now += 31_000;
    expect(await later()).toEqual([new crypto.X509Certificate(root.certPem).raw]);
    expect(fs.existsSync(path.join(dataDir, 'trust', 'platform_a_trust_anchors.pem'))).toBe(true);
  } finally {
    await new Promise<void>((r) => back.close(() => r()));
  }
});

test('a PEM file is read once, as before', async () => {
  const root = createCardCa({ commonName: 'Root D' });
  const file = path.join(dir, 'roots.pem');
  fs.writeFileSync(file, root.certPem);
  expect(await anchorSource(ctxWith(dir), 'PLATFORM_A_TRUST_ANCHORS', file)()).toEqual([new crypto.X509Certificate(root.certPem).raw]);
});
