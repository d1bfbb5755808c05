import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ocspIndexLine } from '../../src/guard/pki/dev-pki';
import { createLogger } from '../../src/logger';
import { OcspStapler } from '../../src/tls';
import { startOcspResponder, type OcspResponder } from '../helpers/ocsp-responder';
import { freePort } from '../helpers/swtpm';
import { TlsPki } from '../helpers/tls-pki';

/**
 * The stapler's timing against a real `openssl ocsp` responder whose answers are valid for two
 * minutes: the answer is renewed on its own before nextUpdate, and once nextUpdate has passed with
 * the responder down nothing is stapled (an expired answer would be refused by every client).
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-stapler-'));
let pki: TlsPki;
let leaf: crypto.X509Certificate;
let issuer: crypto.X509Certificate;
let responder: OcspResponder | undefined;
let now = Date.now();
const stapler = () => new OcspStapler(createLogger(process.env.T_LOG ?? 'silent'), () => new Date(now), { maxRefreshMs: 300, retryMs: 300, minRefreshMs: 100 });

beforeAll(async () => {
  pki = new TlsPki(dir, 'stapler-ca');
  const port = await freePort();
  const cert = pki.issue('stapled', { server: true, ocspUrl: `http://127.0.0.1:${port}` });
  fs.writeFileSync(path.join(dir, 'index.txt'), `${ocspIndexLine(fs.readFileSync(cert.cert, 'utf8'))}\n`);
  leaf = new crypto.X509Certificate(fs.readFileSync(cert.cert));
  issuer = new crypto.X509Certificate(fs.readFileSync(pki.caPem));
  responder = await startOcspResponder({ index: path.join(dir, 'index.txt'), caCert: pki.caPem, signerCert: pki.caPem, signerKey: pki.caKey, port, nextUpdateMinutes: 2 });
}, 60_000);

afterAll(async () => {
  await responder?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('the answer is renewed by the timer, before its nextUpdate; with the responder down the last one stays until nextUpdate, then none is stapled', async () => {
  const s = stapler();
  try {
    await s.follow(leaf, issuer);
    const first = s.current();
    expect([first?.length, s.status()]).toEqual([expect.any(Number), 'good']);
    // No call of refresh(): the timer asks again (here after 300 ms, the longest wait allowed).
    await until('a renewed answer', () => s.current() !== undefined && s.current() !== first);
    expect(s.status()).toBe('good');

    await responder!.stop();
    responder = undefined;
    const last = s.current();
    await new Promise((r) => setTimeout(r, 1_000)); // several failed tries meanwhile
    expect(s.current()).toBe(last);
    now += 119_000; // still before the answer's nextUpdate (two minutes after it was made)
    expect(s.current()).toBe(last);
    now += 5 * 60_000; // past it
    expect([s.current(), s.status()]).toEqual([undefined, undefined]);
  } finally {
    s.stop();
  }
});
