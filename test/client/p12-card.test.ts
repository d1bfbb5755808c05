import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compactVerify, importX509 } from 'jose';
import { readP12Card } from '../../src/client/card/p12-card';
import { ClientInputError } from '../../src/client/input-error';
import { createCardCa, issueCard, type CardCurve } from '../../src/guard/pki/dev-pki';

// PKCS#12 files as openssl writes them today (AES-256, PBKDF2, SHA-256 MAC) and with -legacy
// (RC2-40 certificates, 3DES key, SHA-1 MAC), for the three kinds of institution card.

let dir: string;
const ca = createCardCa({ commonName: 'P12 Test CA' });
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'p12-'));
  fs.writeFileSync(path.join(dir, 'ca.pem'), ca.certPem);
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function p12Of(curve: CardCurve, o: { legacy?: boolean; password?: string; withCa?: boolean; admission?: boolean } = {}): { file: string; telematikId: string; certPem: string } {
  const telematikId = `1-P12-${curve}-${o.legacy ? 'legacy' : 'aes'}`;
  const card = issueCard(ca, { telematikId, curve, admission: o.admission });
  const base = path.join(dir, `${telematikId}-${crypto.randomUUID()}`);
  fs.writeFileSync(`${base}.pem`, card.certPem);
  fs.writeFileSync(`${base}.key`, card.keyPem);
  const args = ['pkcs12', '-export', '-in', `${base}.pem`, '-inkey', `${base}.key`, '-out', `${base}.p12`, '-passout', `pass:${o.password ?? '00'}`, ...(o.withCa ? ['-certfile', path.join(dir, 'ca.pem')] : []), ...(o.legacy ? ['-legacy'] : [])];
  execFileSync('openssl', args, { stdio: 'ignore' });
  return { file: `${base}.p12`, telematikId, certPem: card.certPem };
}

describe.each([false, true])('a PKCS#12 file (legacy: %s)', (legacy) => {
  test.each<[CardCurve, string]>([
    ['P-256', 'ES256'],
    ['brainpoolP256r1', 'BP256R1'],
    ['rsa', 'PS256'],
  ])('of a %s card signs as %s, the certificate in x5c', async (curve, alg) => {
    const p = p12Of(curve, { legacy });
    const card = readP12Card(p.file, '00');
    expect([card.alg, card.admission?.telematikId, card.certificate.fingerprint256]).toEqual([alg, p.telematikId, new crypto.X509Certificate(p.certPem).fingerprint256]);
    const jws = await card.signJwt({ sub: p.telematikId });
    const header = JSON.parse(Buffer.from(jws.split('.')[0], 'base64url').toString());
    expect(header).toMatchObject({ alg, typ: 'JWT', x5c: [card.certificate.raw.toString('base64')] });
    const [h, pl, sig] = jws.split('.');
    const key = card.certificate.publicKey;
    const input = Buffer.from(`${h}.${pl}`);
    const ok = curve === 'rsa' ? crypto.verify('sha256', input, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }, Buffer.from(sig, 'base64url')) : crypto.verify('sha256', input, { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url'));
    expect(ok).toBe(true);
    if (curve === 'P-256') await expect(compactVerify(jws, await importX509(p.certPem, 'ES256'))).resolves.toBeDefined();
  });
});

test('the CA certificates in the file travel as the chain (x5c[1..])', async () => {
  const card = readP12Card(p12Of('P-256', { withCa: true }).file, '00');
  const header = JSON.parse(Buffer.from((await card.signJwt({})).split('.')[0], 'base64url').toString());
  // A self-signed root is left out: the guard's anchors hold it, a chain never needs it.
  expect(header.x5c).toHaveLength(1);
});

test.each<[string, () => [string, string | undefined], string, RegExp]>([
  ['a wrong password', () => [p12Of('P-256').file, 'wrong'], 'p12Password', /^the PKCS#12 file .+\.p12: wrong password \(TERMINUS_CLIENT_P12_PASSWORD\)$/],
  ['no password', () => [p12Of('P-256').file, undefined], 'p12Password', /needs its password: set TERMINUS_CLIENT_P12_PASSWORD/],
  ['a missing file', () => [path.join(dir, 'none.p12'), '00'], 'p12', /^the PKCS#12 file .+none\.p12 does not exist$/],
  ['a PEM file', () => [path.join(dir, 'ca.pem'), '00'], 'p12', /is not a PKCS#12 file \(not DER\)|is not a readable PKCS#12 file/],
  ['a certificate without admission', () => [p12Of('P-256', { admission: false }).file, '00'], 'p12', /^the card certificate in the PKCS#12 file .+ has no admission extension \(Telematik-ID\): not an institution card$/],
])('%s is a ClientInputError naming the option and the file', (_name, args, option, message) => {
  const [file, password] = args();
  let err: unknown;
  try {
    readP12Card(file, password);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ClientInputError);
  expect([(err as ClientInputError).option, (err as Error).message]).toEqual([option, expect.stringMatching(message)]);
});
