import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import type { AppContext } from '../../src/context';
import { createLogger } from '../../src/logger';
import { anchorSource } from '../../src/guard/pki/anchor-source';
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

test('a PEM file is read once, as before', async () => {
  const root = createCardCa({ commonName: 'Root D' });
  const file = path.join(dir, 'roots.pem');
  fs.writeFileSync(file, root.certPem);
  expect(await anchorSource(ctxWith(dir), 'PLATFORM_A_TRUST_ANCHORS', file)()).toEqual([new crypto.X509Certificate(root.certPem).raw]);
});
