import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { runDevPki } from '../../src/cli/dev-pki';
import { parseAdmission, ADMISSION_OID } from '../../src/common/admission';
import { verifyCardChain } from '../../src/guard/pki/card-trust';
import { aesGcmKeyEncryption } from '../../src/server-lib/key-encryption';
import * as pkijs from 'pkijs';
import { decodeHeader, exchange, guardHarness, type Harness } from './helpers/harness';

describe('signing keys', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await guardHarness({ env: { GUARD_KEY_SECRET: 'test-secret-for-keys-of-32-characters' } });
  });
  afterAll(() => h.close());

  test('the private key is stored sealed with AES-256-GCM under GUARD_KEY_SECRET, the public key published with its kid', async () => {
    const { res } = await exchange(h);
    const kid = decodeHeader(res.body.access_token).kid as string;
    const row = (await h.ctx.db.query<{ private_enc: string; public_jwk: Record<string, string> }>('SELECT private_enc, public_jwk FROM guard_signing_key WHERE kid = $1', [kid])).rows[0];
    expect(row.private_enc).not.toMatch(/BEGIN|MIG/);
    const kek = aesGcmKeyEncryption(crypto.createHash('sha256').update('test-secret-for-keys-of-32-characters').digest());
    const key = crypto.createPrivateKey({ key: kek.open(row.private_enc), format: 'der', type: 'pkcs8' });
    expect(crypto.createPublicKey(key).export({ format: 'jwk' })).toMatchObject({ x: row.public_jwk.x, y: row.public_jwk.y });
    expect(() => aesGcmKeyEncryption(crypto.randomBytes(32)).open(row.private_enc)).toThrow();
  });

  test('rotation: after 30 days a new key signs; the old one stays published until its tokens expired, then goes', async () => {
    const first = decodeHeader((await exchange(h)).res.body.access_token).kid;
    const shift = 30 * 86_400_000 + 3_600_000;
    h.ctx.clock.advance(shift);
    try {
      // a fresh app instance (a restarted replica) sees the retired key and makes a new one
      const { createApp } = await import('../../src/app');
      const app = createApp(h.ctx);
      const nonce = (await request(app).get('/svc/v1/nonce')).body.nonce;
      const second = decodeHeader((await exchange({ ...h, app }, { nonce })).res.body.access_token).kid;
      expect(second).not.toBe(first);
      const kids = (await request(app).get('/svc/v1/jwks')).body.keys.map((k: { kid: string }) => k.kid);
      expect(kids).toEqual(expect.arrayContaining([first, second]));
      h.ctx.clock.advance(2 * 86_400_000);
      const later = (await request(createApp(h.ctx)).get('/svc/v1/jwks')).body.keys.map((k: { kid: string }) => k.kid);
      expect(later).toContain(second);
      expect(later).not.toContain(first);
    } finally {
      h.ctx.clock.advance(-shift - 2 * 86_400_000);
    }
  });
});

describe('terminus dev-pki DIR', () => {
  test('writes a card CA and P-256 and brainpoolP256r1 cards with the admission extension, as PEM', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-pki-'));
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await runDevPki([dir])).toBe(0);
    } finally {
      out.mockRestore();
    }
    const files = fs.readdirSync(dir).sort();
    expect(files).toEqual(['card-brainpool.key.pem', 'card-brainpool.pem', 'card-ca.key.pem', 'card-ca.pem', 'card-p256.key.pem', 'card-p256.pem', 'cards.json']);
    expect(fs.statSync(path.join(dir, 'card-ca.key.pem')).mode & 0o777).toBe(0o600);
    const ca = new crypto.X509Certificate(fs.readFileSync(path.join(dir, 'card-ca.pem')));
    expect(ca.ca).toBe(true);
    for (const [file, curve] of [
      ['card-p256', 'prime256v1'],
      ['card-brainpool', 'brainpoolP256r1'],
    ]) {
      const cert = new crypto.X509Certificate(fs.readFileSync(path.join(dir, `${file}.pem`)));
      expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe(curve);
      expect(cert.verify(ca.publicKey)).toBe(true);
      const key = crypto.createPrivateKey(fs.readFileSync(path.join(dir, `${file}.key.pem`)));
      expect(crypto.createPublicKey(key).export({ type: 'spki', format: 'der' }).equals(cert.publicKey.export({ type: 'spki', format: 'der' }))).toBe(true);
      const ext = pkijs.Certificate.fromBER(new Uint8Array(cert.raw)).extensions!.find((e) => e.extnID === ADMISSION_OID)!;
      expect(parseAdmission(ext.extnValue.valueBlock.valueHexView)).toMatchObject({ professionOid: '1.2.276.0.76.4.50', telematikId: expect.stringMatching(/^1-2-DEV-PRAXIS/) });
      const { card } = await verifyCardChain([cert.raw.toString('base64')], [ca], new Date());
      expect(card.commonName).toMatch(/^Praxis Dr. Dev/);
      expect(card.organizationName).toBe('Praxis Dr. Dev');
    }
    const openssl = fs.readFileSync(path.join(dir, 'card-p256.pem'), 'utf8');
    expect(openssl).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
  });

  test('without DIR it prints usage and exits 2', async () => {
    const err = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await runDevPki([])).toBe(2);
    } finally {
      err.mockRestore();
    }
  });

  test('CARD_TRUST_ANCHORS from dev-pki files: its cards are accepted, dev-PKI cards of another CA are not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dev-pki-'));
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    await runDevPki([dir]).finally(() => out.mockRestore());
    const h = await guardHarness({ env: { CARD_TRUST_ANCHORS: path.join(dir, 'card-ca.pem') } });
    try {
      const { SoftwareCard } = await import('../../src/client/software-card');
      const bp = new SoftwareCard(fs.readFileSync(path.join(dir, 'card-brainpool.pem'), 'utf8'), fs.readFileSync(path.join(dir, 'card-brainpool.key.pem'), 'utf8'));
      const ok = await exchange(h, { card: bp });
      expect(ok.res.status).toBe(200);
      const other = await exchange(h); // a card of the process' generated dev PKI
      expect(other.res.status).toBe(403);
      expect(other.res.body.error).toBe('access_denied');
    } finally {
      await h.close();
    }
  });
});
