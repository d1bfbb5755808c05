import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { composeParts } from '../../src/app';
import { derToJoseEcdsa, KonnektorCard } from '../../src/client/card/konnektor/konnektor-card';
import { importResources, readResourceFile } from '../../src/fhir';
import { buildCertificate, derToPem } from '../../src/guard/pki/certificate-builder';
import { createCardCa, issueCard, type CardCurve } from '../../src/guard/pki/dev-pki';
import { startServer, type RunningServer } from '../../src/server';
import { projectPath } from '../../src/server-lib/paths';
import { runCli, type CliRun } from '../helpers/cli-in-process';
import { createTestContext } from '../helpers/context';
import { startKonnektorStandIn, type StandIn, type StandInCard, type StandInOptions } from '../helpers/konnektor-stand-in';
import { freePort } from '../helpers/swtpm';
import { TlsPki } from '../helpers/tls-pki';

// Logging in with the practice's SMC-B behind a Konnektor: the .kon file, the Konnektor's SOAP
// services over TLS, the card signing the subject token; then a booking with that session. The
// Konnektor is a stand-in (test/helpers/konnektor-stand-in.ts): none can run here.

let dir: string;
let server: RunningServer;
let origin: string;
let pki: TlsPki;
const cardCa = createCardCa({ commonName: 'SMC-B CA (Konnektor tests)' });
const CONTEXT = { mandantId: 'Praxis-1', clientSystemId: 'Terminus', workplaceId: 'Empfang' };
const PASSWORD = 'konnektor test passphrase';
const standIns: StandIn[] = [];
/** A free Slot for each booking test: an SMC-B of each key kind, and the client-certificate login. */
const SLOTS = ['Konnektor-Slot-P-256', 'Konnektor-Slot-brainpoolP256r1', 'Konnektor-Slot-rsa', 'Konnektor-Slot-mTLS'];

function smcb(handle: string, telematikId: string, curve: CardCurve, o: Partial<StandInCard> = {}): StandInCard {
  const c = issueCard(cardCa, { telematikId, curve, commonName: `Praxis ${telematikId}` });
  const key = { certPem: c.certPem, keyPem: c.keyPem };
  return { handle, iccsn: `8027680000${String(standIns.length).padStart(10, '0')}`, holder: `Praxis ${telematikId}`, ...(curve === 'rsa' ? { rsa: key } : { ecc: key }), ...o };
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'konnektor-'));
  pki = new TlsPki(path.join(dir, 'tls'), 'konnektor-ca');
  fs.writeFileSync(path.join(dir, 'card-ca.pem'), cardCa.certPem);
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext({ env: { PUBLIC_URL: origin, GUARD_ENFORCEMENT: 'on', DEMO_DATA: 'false', CARD_TRUST_ANCHORS: path.join(dir, 'card-ca.pem') } });
  const fixture = readResourceFile(projectPath('fixtures', 'isik-stufe5.json')) as unknown as { entry: { resource: { resourceType: string; id?: string } }[] };
  // The fixture's one free Slot, copied for each booking here, so every login below can book.
  const template = fixture.entry.map((e) => e.resource).find((r) => r.resourceType === 'Slot' && r.id === 'Slot-Free-Example')!;
  const slots = SLOTS.map((id, i) => ({ resource: { ...template, id, start: `2027-03-0${i + 1}T09:00:00Z`, end: `2027-03-0${i + 1}T09:30:00Z` } }));
  await importResources(composeParts(ctx).fhir, { ...fixture, entry: [...fixture.entry, ...slots] } as never);
  server = await startServer({ ...ctx.config, port, host: '127.0.0.1' }, ctx);
}, 120_000);
afterAll(async () => {
  await Promise.all(standIns.map((s) => s.close()));
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function standIn(cards: StandInCard[], o: Partial<StandInOptions> = {}): Promise<StandIn> {
  const { cert, key } = pki.issue('konnektor.praxis.local', { server: true, san: 'DNS:konnektor.praxis.local,IP:127.0.0.1' });
  const s = await startKonnektorStandIn({ cert, key, context: CONTEXT, cards, ...o });
  standIns.push(s);
  return s;
}

/** A .kon file for `s`: basic auth by default, the stand-in's CA in trustStore, secrets through ${VAR}. */
function konFile(s: StandIn, o: Record<string, unknown> = {}): string {
  const ca = new crypto.X509Certificate(fs.readFileSync(pki.caPem)).raw.toString('base64');
  const file = path.join(dir, `${crypto.randomUUID()}.kon`);
  fs.writeFileSync(file, JSON.stringify({ version: '1.0.0', url: s.url, ...CONTEXT, credentials: { type: 'basic', username: 'praxis', password: '${KONNEKTOR_PASSWORD}' }, env: 'ru', trustStore: [ca], ...o }, null, 2));
  return file;
}

/** The Konnektor's TLS client certificate as a PKCS#12 file of `openssl pkcs12` (made once), base64 for ${KONNEKTOR_P12}. */
let clientP12: string | undefined;
function konnektorClientP12(): string {
  if (!clientP12) {
    const client = pki.issue('terminus-praxis');
    const p12 = path.join(dir, 'konnektor-client.p12');
    execFileSync('openssl', ['pkcs12', '-export', '-in', client.cert, '-inkey', client.key, '-out', p12, '-passout', 'pass:00'], { stdio: 'ignore' });
    clientP12 = fs.readFileSync(p12).toString('base64');
  }
  return clientP12;
}

/** Books `slot` for the fixture's patient with the session of `home`. */
async function book(home: string, slot: string): Promise<void> {
  const r = await cli(['book', '--slot', `Slot/${slot}`, '--patient', 'Patient/Patient-Read-Example'], { TERMINUS_CLIENT_HOME: home });
  expect([r.code, r.stderr]).toEqual([0, '']);
  expect(r.json).toMatchObject({ resourceType: 'Appointment', status: expect.any(String), slot: [{ reference: `Slot/${slot}` }] });
}

function cli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return runCli(args, { env: { TERMINUS_CLIENT_HOME: path.join(dir, 'home'), TERMINUS_CLIENT_PASSWORD: PASSWORD, KONNEKTOR_PASSWORD: 'geheim', ...env } });
}

describe('login through the Konnektor', () => {
  test.each<[CardCurve, string, { signatureType: string; signatureSchemes?: string }]>([
    ['P-256', 'ES256', { signatureType: 'urn:bsi:tr:03111:ecdsa' }],
    ['brainpoolP256r1', 'BP256R1', { signatureType: 'urn:bsi:tr:03111:ecdsa' }],
    ['rsa', 'PS256', { signatureType: 'urn:ietf:rfc:3447', signatureSchemes: 'RSASSA-PSS' }],
  ])('an SMC-B with a %s key logs in (%s, one ExternalAuthenticate), and the session books', async (curve, alg, asked) => {
    const telematikId = `5-SMC-B-${curve}`;
    const s = await standIn([smcb('CH-1', telematikId, curve)]);
    const home = path.join(dir, `home-${curve}`);
    const signed = jest.spyOn(KonnektorCard.prototype, 'signJwt');
    try {
      const login = await cli(['login', '--server', origin, '--konnektor', konFile(s)], { TERMINUS_CLIENT_HOME: home });
      expect([login.code, login.stderr]).toEqual([0, '']);
      expect(s.calls).toMatchObject({ sds: 1, GetCards: 1, GetPinStatus: 1, ExternalAuthenticate: 1 });
      expect(s.calls.ReadCardCertificate).toBe(curve === 'rsa' ? 2 : 1);
      // The card was asked for the signature its key makes (conn/SignatureService.xsd OptionalInputs) ...
      expect(s.signatures).toEqual([{ handle: 'CH-1', ...asked, digest: expect.any(String) }]);
      // ... over the SHA-256 of the signing input of the subject token the server accepted, whose JOSE header names that algorithm.
      expect(signed).toHaveBeenCalledTimes(1);
      const token = await (signed.mock.results[0].value as Promise<string>);
      const [header, payload] = token.split('.');
      expect(JSON.parse(Buffer.from(header, 'base64url').toString())).toMatchObject({ alg, typ: 'JWT' });
      expect(crypto.createHash('sha256').update(`${header}.${payload}`).digest('base64')).toBe(s.signatures[0].digest);
    } finally {
      signed.mockRestore();
    }
    const status = await cli(['status'], { TERMINUS_CLIENT_HOME: home });
    expect(status.json).toMatchObject({ logged_in: true });
    await book(home, `Konnektor-Slot-${curve}`);
    // Still one signature by the card: the booking ran on the token it earned.
    expect(s.calls.ExternalAuthenticate).toBe(1);
  });

  test('with a client certificate (pkcs12 credentials) over TLS 1.2, as Konnektors in the field speak it, and the session books', async () => {
    const s = await standIn([smcb('CH-1', '5-SMC-B-MTLS', 'P-256')], { clientCa: pki.caPem, maxVersion: 'TLSv1.2' });
    const kon = konFile(s, { credentials: { type: 'pkcs12', data: '${KONNEKTOR_P12}', password: '00' } });
    const home = path.join(dir, 'home-mtls');
    const login = await cli(['login', '--server', origin, '--konnektor', kon], { TERMINUS_CLIENT_HOME: home, KONNEKTOR_P12: konnektorClientP12() });
    expect([login.code, login.stderr]).toEqual([0, '']);
    expect(s.calls.ExternalAuthenticate).toBe(1);
    await book(home, 'Konnektor-Slot-mTLS');
  });

  test('two SMC-Bs: without telematikId a clear error listing both; with it, that card', async () => {
    const s = await standIn([smcb('CH-1', '5-PRAXIS-A', 'P-256'), smcb('CH-2', '5-PRAXIS-B', 'brainpoolP256r1')]);
    const refused = await cli(['login', '--server', origin, '--konnektor', konFile(s)], { TERMINUS_CLIENT_HOME: path.join(dir, 'home-two') });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/sees 2 SMC-Bs for Mandant Praxis-1, client system Terminus, workplace Empfang: name one with "telematikId" in the \.kon file .*: CH-1 \(Telematik-ID 5-PRAXIS-A, Praxis 5-PRAXIS-A, ICCSN \d+\); CH-2 \(Telematik-ID 5-PRAXIS-B/);
    const chosen = await cli(['login', '--server', origin, '--konnektor', konFile(s, { telematikId: '5-PRAXIS-B' })], { TERMINUS_CLIENT_HOME: path.join(dir, 'home-two') });
    expect([chosen.code, chosen.stderr]).toEqual([0, '']);
  });

  test.each<[string, number, () => Promise<{ kon: string; env?: Record<string, string> }>, RegExp]>([
    ['no SMC-B', 1, async () => ({ kon: konFile(await standIn([])) }), /sees no SMC-B for Mandant Praxis-1, client system Terminus, workplace Empfang: is the card inserted/],
    ['the PIN not verified', 1, async () => ({ kon: konFile(await standIn([smcb('CH-7', '5-LOCKED', 'P-256', { pin: 'VERIFIABLE' })])) }), /the SMC-B is not unlocked: card CH-7 \(Telematik-ID 5-LOCKED.*\) has PIN\.SMC VERIFIABLE \(3 tries left\); unlock it/],
    ['a SOAP fault with a gematik code', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')], { fault: { operation: 'GetCards', code: 4204, text: 'Clientsystem nicht authentifiziert' } })) }), /the Konnektor does not accept this client system: check the \.kon credentials .*\(the Konnektor says: Clientsystem nicht authentifiziert, gematik error 4204\)/],
    ['a wrong call context', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')]), { workplaceId: 'Sprechzimmer' }) }), /the Konnektor does not know the workplace of the \.kon file \(workplaceId\) \(the Konnektor says: Ungültige Arbeitsplatz-ID, gematik error 4006\)/],
    ['a wrong basic password', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')], { basic: { username: 'praxis', password: 'richtig' } })) }), /the Konnektor refused the client at https:\/\/127\.0\.0\.1:\d+\/connector\.sds \(HTTP 401\): check the \.kon credentials/],
    ['its certificate not in trustStore', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')]), { trustStore: [new crypto.X509Certificate(cardCa.certPem).raw.toString('base64')] }) }), /the Konnektor's TLS certificate \(CN=konnektor\.praxis\.local\) is not trusted by the \.kon trustStore/],
    ['an expectedHost its certificate does not name', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')]), { expectedHost: 'other.praxis.local' }) }), /the Konnektor's TLS certificate is not for other\.praxis\.local \(expectedHost\)/],
    ['no answer in time', 2, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')], { delayMs: 4000 })), env: { TERMINUS_CLIENT_KONNEKTOR_TIMEOUT: '1' } }), /the Konnektor at https:\/\/127\.0\.0\.1:\d+\/connector\.sds did not answer in time/],
    ['a .kon that does not validate', 2, async () => ({ kon: konFile(await standIn([]), { mandantId: '', env: 'prod' }) }), /invalid \.kon configuration .*:\n {2}- "env" must be one of ru, tu, pu \(got "prod"\)\n {2}- "mandantId" is required/],
    ['a wrong password for the pkcs12 credentials', 2, async () => ({ kon: konFile(await standIn([]), { credentials: { type: 'pkcs12', data: '${KONNEKTOR_P12}', password: 'falsch' } }), env: { KONNEKTOR_P12: konnektorClientP12() } }), /credentials\.data of the \.kon file \/.*\.kon: wrong password \(credentials\.password\)/],
    ['an answer whose Status carries a gematik error', 1, async () => ({ kon: konFile(await standIn([smcb('CH-1', '5-X', 'P-256')], { statusError: { operation: 'GetPinStatus', code: 4018, text: 'Kartensitzung belegt' } })) }), /the card is in use by another session; try again in a moment \(the Konnektor says: CardService\.GetPinStatus: Kartensitzung belegt, gematik error 4018\)/],
    ['system credentials', 2, async () => ({ kon: konFile(await standIn([]), { credentials: { type: 'system', name: 'konnektor' } }) }), /credentials of type system .* are not supported on this platform/],
  ])('%s: exit %d with a message the practice understands', async (_name, code, setup, message) => {
    const { kon, env } = await setup();
    const r = await cli(['login', '--server', origin, '--konnektor', kon], { TERMINUS_CLIENT_HOME: path.join(dir, `home-${crypto.randomUUID()}`), ...env });
    expect([r.code, r.stderr]).toEqual([code, expect.stringMatching(message)]);
    expect(r.stderr).not.toMatch(/soap:|<\?xml|Envelope/);
  });

  test('rewriteServiceEndpoints, a pinned end-entity certificate and expectedHost, as a Konnektor behind NAT needs them', async () => {
    const s = await standIn([smcb('CH-1', '5-NAT', 'P-256')], { advertise: 'https://konnektor.invalid:8443' });
    const serverCert = new crypto.X509Certificate(fs.readFileSync(path.join(dir, 'tls', 'konnektor-ca-konnektor.praxis.local.pem'))).raw.toString('base64');
    const home = path.join(dir, `home-${crypto.randomUUID()}`);
    const unreachable = await cli(['login', '--server', origin, '--konnektor', konFile(s)], { TERMINUS_CLIENT_HOME: home });
    expect([unreachable.code, unreachable.stderr]).toEqual([2, expect.stringMatching(/the Konnektor at https:\/\/konnektor\.invalid:8443\/ws\/\w+ cannot be reached/)]);
    const kon = konFile(s, { rewriteServiceEndpoints: true, trustStore: [serverCert], expectedHost: 'konnektor.praxis.local' });
    const login = await cli(['login', '--server', origin, '--konnektor', kon], { TERMINUS_CLIENT_HOME: home });
    expect([login.code, login.stderr]).toEqual([0, '']);
  });

  test('a pinned end-entity certificate past its validity is refused: the pin stands in for a chain, not for the dates', async () => {
    const key = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const der = buildCertificate({
      subject: { commonName: 'konnektor.praxis.local' },
      subjectPublicKey: key.publicKey,
      issuerKey: key.privateKey,
      notBefore: new Date(Date.now() - 400 * 86_400_000),
      notAfter: new Date(Date.now() - 35 * 86_400_000),
      extKeyUsage: ['1.3.6.1.5.5.7.3.1'],
    });
    const cert = path.join(dir, 'expired-konnektor.pem');
    const keyFile = path.join(dir, 'expired-konnektor.key');
    fs.writeFileSync(cert, derToPem(der));
    fs.writeFileSync(keyFile, key.privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const s = await startKonnektorStandIn({ cert, key: keyFile, context: CONTEXT, cards: [smcb('CH-1', '5-EXPIRED', 'P-256')] });
    standIns.push(s);
    const r = await cli(['login', '--server', origin, '--konnektor', konFile(s, { trustStore: [der.toString('base64')] })], { TERMINUS_CLIENT_HOME: path.join(dir, `home-${crypto.randomUUID()}`) });
    expect([r.code, r.stderr]).toEqual([1, expect.stringMatching(/the Konnektor's TLS certificate \(CN=konnektor\.praxis\.local\) pinned in the \.kon trustStore is not valid now/)]);
  });

  test('the key store remembers the .kon file, never the secrets it substitutes', async () => {
    const s = await standIn([smcb('CH-1', '5-REMEMBER', 'P-256')]);
    const kon = konFile(s);
    const home = path.join(dir, 'home-remember');
    expect((await cli(['login', '--server', origin, '--konnektor', kon], { TERMINUS_CLIENT_HOME: home })).code).toBe(0);
    const { KeyStore } = await import('../../src/client');
    const store = await KeyStore.open({ home, password: PASSWORD });
    expect(store.server(origin)).toMatchObject({ card: { backend: 'konnektor', konFile: kon } });
    expect(JSON.stringify(store.data)).not.toContain('geheim');
    store.close();
  });
});

test('konnektor inspect: services with versions, and each SMC-B with handle, Telematik-ID and PIN status', async () => {
  const s = await standIn([smcb('CH-1', '5-INSPECT-A', 'P-256'), smcb('CH-2', '5-INSPECT-B', 'rsa', { pin: 'VERIFIABLE' })]);
  const r = await cli(['konnektor', 'inspect', konFile(s)]);
  expect([r.code, r.stderr]).toEqual([0, '']);
  expect(r.json.configuration).toEqual({ file: expect.stringMatching(/\.kon$/), version: '1.0.0', url: s.url, env: 'ru', mandantId: 'Praxis-1', workplaceId: 'Empfang', clientSystemId: 'Terminus', credentials: { type: 'basic', username: 'praxis' }, trustStoreSize: 1 });
  expect(r.json.productInformation).toMatchObject({ productType: 'Konnektor', vendor: 'TERMINUS', fwVersion: '5.0.0' });
  expect(r.json.services.map((x: { name: string; versions: { version: string }[] }) => `${x.name} ${x.versions.map((v) => v.version).join('/')}`)).toEqual(['AuthSignatureService 7.4.1/7.3.0', 'CardService 8.1.2', 'CertificateService 6.0.0/6.0.1', 'EventService 7.2.0']);
  expect(r.json.cards).toEqual([
    expect.objectContaining({ handle: 'CH-1', type: 'SMC-B', telematikId: '5-INSPECT-A', pinStatus: 'VERIFIED', certificate: expect.objectContaining({ key: 'prime256v1' }) }),
    expect.objectContaining({ handle: 'CH-2', type: 'SMC-B', telematikId: '5-INSPECT-B', pinStatus: 'VERIFIABLE', leftTries: 3, certificate: expect.objectContaining({ key: 'RSA' }) }),
  ]);
  expect(r.stdout).not.toContain('geheim');
});

test('a DER ECDSA signature becomes the JWS r||s form, short integers padded, a malformed one refused', () => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'brainpoolP256r1' });
  for (let i = 0; i < 20; i++) {
    const data = crypto.randomBytes(16);
    const jose = derToJoseEcdsa(crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'der' }), 32);
    expect(jose).toHaveLength(64);
    expect(crypto.verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose)).toBe(true);
  }
  expect(() => derToJoseEcdsa(Buffer.from('3006020101020102ff', 'hex'), 32)).toThrow(/not DER SEQUENCE/);
});
