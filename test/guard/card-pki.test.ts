import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as pkijs from 'pkijs';
import { pino } from 'pino';
import { runDevPki } from '../../src/cli/dev-pki';
import { SoftwareCard } from '../../src/client/software-card';
import { buildCertificate, derToPem } from '../../src/guard/pki/certificate-builder';
import { createCardCa, issueCard, issueOcspResponder, ocspIndexLine, type CardCa } from '../../src/guard/pki/dev-pki';
import { OcspChecker } from '../../src/guard/pki/ocsp';
import { startOcspResponder, type OcspResponder } from '../helpers/ocsp-responder';
import { freePort } from '../helpers/swtpm';
import { exchange, guardHarness, type Harness } from './helpers/harness';

/**
 * Card certificates validated by a path-validation library and checked by OCSP against a real
 * `openssl ocsp` responder (docs/requirements.md#token-exchange), and `terminus dev-pki` writing
 * RFC 5280 certificates that `openssl verify` accepts.
 */
const DAY = 86_400_000;
let dir: string;
let ca: CardCa;
let responder: OcspResponder;
let deadUrl: string;
let required: Harness;
let ifPresent: Harness;
let off: Harness;
const cards: Record<string, SoftwareCard> = {};

function card(name: string, o: { ocspUrl?: string; issuer?: CardCa; chain?: string[] } = {}): { card: SoftwareCard; certPem: string } {
  const c = issueCard(o.issuer ?? ca, { telematikId: `1-OCSP-${name}`, ocspUrl: o.ocspUrl });
  return { card: new SoftwareCard(c.certPem, c.keyPem, o.chain ?? []), certPem: c.certPem };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'card-pki-'));
  ca = createCardCa();
  fs.writeFileSync(path.join(dir, 'ca.pem'), ca.certPem);
  const signer = issueOcspResponder(ca);
  fs.writeFileSync(path.join(dir, 'ocsp.pem'), signer.certPem);
  fs.writeFileSync(path.join(dir, 'ocsp.key'), signer.keyPem);
  // The responder's URL must be in the cards before the index is written: take the port first.
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  deadUrl = `http://127.0.0.1:${await freePort()}`;
  const good = card('GOOD', { ocspUrl: url });
  const revoked = card('REVOKED', { ocspUrl: url });
  const unknown = card('UNKNOWN', { ocspUrl: url });
  cards.good = good.card;
  cards.revoked = revoked.card;
  cards.unknown = unknown.card;
  cards.down = card('DOWN', { ocspUrl: deadUrl }).card;
  cards.none = card('NONE').card;
  fs.writeFileSync(path.join(dir, 'index.txt'), `${ocspIndexLine(good.certPem)}\n${ocspIndexLine(revoked.certPem, new Date(Date.now() - DAY))}\n`);
  responder = await startOcspResponder({ index: path.join(dir, 'index.txt'), caCert: path.join(dir, 'ca.pem'), signerCert: path.join(dir, 'ocsp.pem'), signerKey: path.join(dir, 'ocsp.key'), port });
  expect(responder.url).toBe(url);
  const env = { CARD_TRUST_ANCHORS: path.join(dir, 'ca.pem') };
  required = await guardHarness({ env: { ...env, CARD_OCSP: 'required' } });
  ifPresent = await guardHarness({ db: required.ctx.db, env: { ...env, CARD_OCSP: 'if-present' } });
  off = await guardHarness({ db: required.ctx.db, env: { ...env, CARD_OCSP: 'off' } });
}, 60_000);
afterAll(async () => {
  await responder?.stop();
  await off?.close();
  await ifPresent?.close();
  await required?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const status = async (h: Harness, c: SoftwareCard) => {
  const { res } = await exchange(h, { card: c, telematikId: c.admission!.telematikId });
  return { status: res.status, error: res.body.error as string | undefined, description: res.body.error_description as string | undefined };
};

describe('OCSP (CARD_OCSP)', () => {
  test('a good card is admitted in every mode', async () => {
    for (const h of [required, ifPresent, off]) expect((await status(h, cards.good)).status).toBe(200);
  });

  test('a revoked card: 403 access_denied under required and if-present, admitted with off', async () => {
    for (const h of [required, ifPresent]) {
      const r = await status(h, cards.revoked);
      expect(r.status).toBe(403);
      expect(r.error).toBe('access_denied');
      expect(r.description).toMatch(/revoked/);
    }
    expect((await status(off, cards.revoked)).status).toBe(200);
  });

  test('unknown status: 403 under required, admitted (with a warning) under if-present', async () => {
    const r = await status(required, cards.unknown);
    expect(r.status).toBe(403);
    expect(r.description).toMatch(/does not know/);
    expect((await status(ifPresent, cards.unknown)).status).toBe(200);
  });

  test('responder down: 503 under required, admitted under if-present', async () => {
    const r = await status(required, cards.down);
    expect(r.status).toBe(503);
    expect(r.error).toBe('temporarily_unavailable');
    expect((await status(ifPresent, cards.down)).status).toBe(200);
  });

  test('a card naming no responder: 403 under required, admitted under if-present', async () => {
    expect((await status(required, cards.none)).status).toBe(403);
    expect((await status(ifPresent, cards.none)).status).toBe(200);
  });

  test('a pair checked before is not parsed again: its responder and the answer are remembered', async () => {
    // if-present: the responder does not know this new card (status unknown, admitted); the answer is cached all the same.
    const checker = new OcspChecker('if-present', 3600, pino({ level: 'silent' }), () => new Date());
    const der = (pem: string) => new crypto.X509Certificate(pem).raw;
    const good = card('PARSED-ONCE', { ocspUrl: responder.url });
    const none = card('NO-RESPONDER');
    const parses = jest.spyOn(pkijs.Certificate, 'fromBER');
    try {
      await checker.check(der(good.certPem), der(ca.certPem));
      await checker.check(der(none.certPem), der(ca.certPem));
      const first = parses.mock.calls.length;
      expect(first).toBeGreaterThan(0);
      await checker.check(der(good.certPem), der(ca.certPem));
      await checker.check(der(none.certPem), der(ca.certPem));
      expect(parses.mock.calls.length).toBe(first);
    } finally {
      parses.mockRestore();
    }
  });

  test('answers are cached until nextUpdate: with the responder gone a good card still passes', async () => {
    const second = await guardHarness({ db: required.ctx.db, env: { CARD_TRUST_ANCHORS: path.join(dir, 'ca.pem'), CARD_OCSP: 'required' } });
    try {
      expect((await status(second, cards.good)).status).toBe(200);
      await responder.stop();
      expect((await status(second, cards.good)).status).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe('card chains (RFC 5280 by the path-validation library)', () => {
  function intermediate(o: { ca: boolean; notAfter?: Date; pathLen?: number }): CardCa {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const der = buildCertificate({
      subject: { commonName: `Intermediate ${crypto.randomUUID()}`, countryName: 'DE' },
      issuerCert: new crypto.X509Certificate(ca.certPem).raw,
      subjectPublicKey: publicKey,
      issuerKey: crypto.createPrivateKey(ca.keyPem),
      notBefore: new Date(Date.now() - 10 * DAY),
      notAfter: o.notAfter ?? new Date(Date.now() + 365 * DAY),
      ca: o.ca,
      keyUsage: 0x06,
    });
    return { certPem: derToPem(der), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
  }

  test('a chain through a CA intermediate is admitted', async () => {
    const mid = intermediate({ ca: true });
    expect((await status(off, card('MID-OK', { issuer: mid, chain: [mid.certPem] }).card)).status).toBe(200);
  });

  test('an intermediate that is not a CA: 403', async () => {
    const mid = intermediate({ ca: false });
    const r = await status(off, card('MID-NOCA', { issuer: mid, chain: [mid.certPem] }).card);
    expect(r.status).toBe(403);
    expect(r.description).toMatch(/does not chain|CA/);
  });

  test('an expired intermediate: 403', async () => {
    const mid = intermediate({ ca: true, notAfter: new Date(Date.now() - DAY) });
    const r = await status(off, card('MID-EXP', { issuer: mid, chain: [mid.certPem] }).card);
    expect(r.status).toBe(403);
    expect(r.error).toBe('access_denied');
  });
});

describe('terminus dev-pki', () => {
  const quiet = <T>(f: () => Promise<T>) => {
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    return f().finally(() => {
      out.mockRestore();
      err.mockRestore();
    });
  };

  test('writes RFC 5280 certificates that openssl verify accepts (UTCTime, key identifiers, key usage)', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-pki-'));
    try {
      expect(await quiet(() => runDevPki([d, '--ocsp-url', 'http://127.0.0.1:9/ocsp']))).toBe(0);
      for (const f of ['card-p256.pem', 'card-brainpool.pem', 'ocsp-responder.pem']) {
        expect(execFileSync('openssl', ['verify', '-x509_strict', '-CAfile', path.join(d, 'card-ca.pem'), path.join(d, f)]).toString()).toMatch(/OK/);
      }
      const cert = pkijs.Certificate.fromBER(new Uint8Array(new crypto.X509Certificate(fs.readFileSync(path.join(d, 'card-p256.pem'))).raw));
      expect(cert.notBefore.type).toBe(0); // UTCTime
      expect(cert.extensions!.map((e) => e.extnID)).toEqual(expect.arrayContaining(['2.5.29.14', '2.5.29.35', '2.5.29.15', '1.3.6.1.5.5.7.1.1']));
      expect(fs.readFileSync(path.join(d, 'ocsp-index.txt'), 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
      const text = execFileSync('openssl', ['x509', '-noout', '-text', '-in', path.join(d, 'ocsp-responder.pem')]).toString();
      expect(text).toMatch(/OCSP Signing/);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  test('refuses to overwrite an existing CA without --force (exit 2, files untouched)', async () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-pki-'));
    try {
      expect(await quiet(() => runDevPki([d]))).toBe(0);
      const before = fs.readFileSync(path.join(d, 'card-ca.pem'), 'utf8');
      expect(await quiet(() => runDevPki([d]))).toBe(2);
      expect(fs.readFileSync(path.join(d, 'card-ca.pem'), 'utf8')).toBe(before);
      expect(await quiet(() => runDevPki([d, '--force']))).toBe(0);
      expect(fs.readFileSync(path.join(d, 'card-ca.pem'), 'utf8')).not.toBe(before);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
