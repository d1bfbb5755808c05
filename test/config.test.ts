import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config';
import { createCardCa } from '../src/guard/pki/dev-pki';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-config-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
function file(name: string, content: string): string {
  const p = path.join(dir, name);
  fs.writeFileSync(p, content);
  return p;
}
const SECRET = 'a-guard-key-secret-of-32-characters!';
const brokenJson = file('broken.json', '{"allowed_professions": [');
const notPem = file('not.pem', 'this is no certificate\n');
const emptyPem = file('empty.pem', '');
const brokenPem = file('broken.pem', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
const caPem = file('ca.pem', createCardCa().certPem);

describe('configuration', () => {
  test('defaults hold with an empty environment', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.publicUrl).toBe('http://localhost:8080');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.repositoryOwners).toEqual([]);
    expect(c.policyFile).toMatch(/policies[/\\]default\.json$/);
    expect(c.trustProxy).toEqual(['loopback']);
    expect([c.metricsHost, c.metricsPort, c.corsOrigins, c.logFormat]).toEqual(['127.0.0.1', 9464, [], 'json']);
    expect([c.dbPoolSize, c.dbIdleTimeoutSec]).toEqual([20, 300]);
    expect(loadConfig({ DB_POOL_SIZE: '8', DB_IDLE_TIMEOUT_SECONDS: '0' })).toMatchObject({ dbPoolSize: 8, dbIdleTimeoutSec: 0 });
  });

  test('TRUST_PROXY takes the names and address ranges Express accepts', () => {
    expect(loadConfig({ TRUST_PROXY: 'uniquelocal' }).trustProxy).toEqual(['uniquelocal']);
    expect(loadConfig({ TRUST_PROXY: ' loopback, linklocal ,10.0.0.0/8,172.18.0.5,fd00::/8,192.168.0.0/255.255.0.0' }).trustProxy).toEqual([
      'loopback',
      'linklocal',
      '10.0.0.0/8',
      '172.18.0.5',
      'fd00::/8',
      '192.168.0.0/255.255.0.0',
    ]);
  });

  test.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['PUBLIC_URL', 'not a url'],
    ['PUBLIC_URL', 'ftp://x'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'http://x'],
    ['LOG_LEVEL', 'loud'],
    ['LOG_FORMAT', 'colourful'],
    ['METRICS_PORT', '99999'],
    ['CORS_ORIGINS', 'https://app.example.org/'],
    ['CORS_ORIGINS', 'not an origin'],
    ['CARD_TRUST_ANCHORS', '/does/not/exist.pem'],
    ['CARD_TRUST_ANCHORS', notPem],
    ['CARD_TRUST_ANCHORS', emptyPem],
    ['CARD_TRUST_ANCHORS', brokenPem],
    ['TPM_EK_TRUST_ANCHORS', notPem],
    ['POLICY_FILE', '/does/not/exist.json'],
    ['POLICY_FILE', brokenJson],
    ['PUBLIC_URL', 'http://h:1/x?y=1#f'],
    ['PUBLIC_URL', 'https://t.example/fhir'],
    ['PUBLIC_URL', 'https://t.example/?a=1'],
    ['PUBLIC_URL', 'https://t.example/#top'],
    ['PUBLIC_URL', 'https://user:pw@t.example'],
    ['GUARD_KEY_SECRET', 'ci-config-check'],
    ['POLICY_ENGINE_URL', 'nope'],
    ['TRUST_PROXY', 'nginx'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['TRUST_PROXY', 'loopback, 300.1.1.1'],
    ['DB_POOL_SIZE', '0'],
    ['DB_POOL_SIZE', 'many'],
    ['DB_IDLE_TIMEOUT_SECONDS', '-1'],
  ])('a bad %s stops start-up naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    try {
      loadConfig({ [name]: value });
    } catch (err) {
      expect((err as ConfigError).variable).toBe(name);
      expect((err as Error).message.startsWith(`${name}:`)).toBe(true);
    }
  });

  test.each([
    [{ NODE_ENV: 'production', GUARD_KEY_SECRET: SECRET }, 'CARD_TRUST_ANCHORS'],
    [{ NODE_ENV: 'production', CARD_TRUST_ANCHORS: caPem }, 'GUARD_KEY_SECRET'],
    [{ NODE_ENV: 'production', GUARD_KEY_SECRET: SECRET, CARD_TRUST_ANCHORS: path.join(__dirname, '..', 'deploy', 'card-trust-anchors.pem') }, 'CARD_TRUST_ANCHORS'],
    [{ NODE_ENV: 'production', CARD_TRUST_ANCHORS: caPem, GUARD_KEY_SECRET: SECRET }, 'SMTP_URL'],
    [{ NODE_ENV: 'production', CARD_TRUST_ANCHORS: caPem, GUARD_KEY_SECRET: SECRET, SMTP_URL: 'smtp://mail.example.org:587', AUDIT_MODE: 'off' }, 'AUDIT_MODE'],
  ])('production refuses %j naming %s', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(expect.objectContaining({ variable }));
  });

  test('production starts with card anchors, a long GUARD_KEY_SECRET and an SMTP relay', () => {
    const c = loadConfig({ NODE_ENV: 'production', CARD_TRUST_ANCHORS: caPem, GUARD_KEY_SECRET: SECRET, SMTP_URL: 'smtp://mail.example.org:587' });
    expect([c.production, c.cardTrustAnchors, c.guardKeySecret, c.smtpUrl]).toEqual([true, caPem, SECRET, 'smtp://mail.example.org:587']);
  });

  test('platform_a trusts the shipped Apple App Attestation Root CA by default (its published fingerprint)', () => {
    const pem = fs.readFileSync(loadConfig({}).platformATrustAnchors, 'utf8');
    expect(new crypto.X509Certificate(pem).fingerprint256).toBe('1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32');
    expect(() => loadConfig({ PLATFORM_A_APP_IDS: 'de.praxis.app:phone' })).toThrow(expect.objectContaining({ variable: 'PLATFORM_A_APP_IDS' }));
    expect(loadConfig({ PLATFORM_A_APP_IDS: 'ABCDE12345.de.praxis.app:phone:development' }).platformAAppIds).toEqual([{ appId: 'ABCDE12345.de.praxis.app', kind: 'phone', development: true }]);
  });

  test("platform_b trusts Google's shipped hardware attestation roots by default (their published fingerprints)", () => {
    const pems = fs.readFileSync(loadConfig({}).platformBTrustAnchors, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
    expect(pems.map((p) => new crypto.X509Certificate(p).fingerprint256)).toEqual([
      'CE:DB:1C:B6:DC:89:6A:E5:EC:79:73:48:BC:E9:28:67:53:C2:B3:8E:E7:1C:E0:FB:E3:4A:9A:12:48:80:0D:FC',
      '6D:9D:B4:CE:6C:5C:0B:29:31:66:D0:89:86:E0:57:74:A8:77:6C:EB:52:5D:9E:43:29:52:0D:E1:2B:A4:BC:C0',
    ]);
    expect(loadConfig({}).platformBRevocationSource).toBe('https://android.googleapis.com/attestation/status');
    expect(() => loadConfig({ PLATFORM_B_PACKAGES: 'de.praxis.app:1234' })).toThrow(expect.objectContaining({ variable: 'PLATFORM_B_PACKAGES' }));
    expect(loadConfig({ PLATFORM_B_PACKAGES: `de.praxis.app:${'AB'.repeat(32)}` }).platformBPackages).toEqual([{ packageName: 'de.praxis.app', signerDigest: 'ab'.repeat(32) }]);
  });

  test('PUBLIC_URL is kept as an origin', () => {
    expect(loadConfig({ PUBLIC_URL: 'https://T.example:8443/' }).publicUrl).toBe('https://t.example:8443');
    expect(loadConfig({ PUBLIC_URL: 'http://localhost:8080' }).publicUrl).toBe('http://localhost:8080');
  });

  test('PUBLIC_URL loses its trailing slash and owners are split', () => {
    const c = loadConfig({ PUBLIC_URL: 'https://t.example/', REPOSITORY_OWNERS: ' 1-A , 2-B,' });
    expect(c.publicUrl).toBe('https://t.example');
    expect(c.repositoryOwners).toEqual(['1-A', '2-B']);
  });

  test('OIDC_PROVIDERS_FILE: providers with keys relative to the file, each mistake named', () => {
    const key = file('idp-client.pem', crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
    const providers = (entries: unknown) => ({ OIDC_PROVIDERS_FILE: file('providers.json', JSON.stringify(entries)) });
    const good = { iss: 'https://idp.example/', client_id: 'terminus', key: path.basename(key), id_token_decryption_key: path.basename(key) };
    const [p] = loadConfig(providers([good])).oidcProviders;
    expect(p).toEqual({
      iss: 'https://idp.example',
      name: 'https://idp.example',
      logoUri: undefined,
      clientId: 'terminus',
      clientAuth: 'private_key_jwt',
      keyFile: key,
      secret: undefined,
      idTokenDecryptionKeyFile: key,
      scopes: ['openid'],
      userIdClaim: 'sub',
    });
    expect(loadConfig({}).oidcProviders).toEqual([]);
    const fails = (entries: unknown, message: RegExp) => {
      expect(() => loadConfig(providers(entries))).toThrow(ConfigError);
      expect(() => loadConfig(providers(entries))).toThrow(message);
    };
    fails({}, /JSON array/);
    fails([{ ...good, iss: 'ftp://idp' }], /entry 0/);
    fails([good, good], /listed twice/);
    fails([{ ...good, client_id: '' }], /client_id/);
    fails([{ ...good, key: undefined }], /private_key_jwt needs key/);
    fails([{ ...good, key: 'missing.pem' }], /file not found/);
    fails([{ ...good, key: path.basename(notPem) }], /not a PEM private key/);
    fails([{ ...good, client_auth: 'client_secret_post', key: undefined }], /needs a secret/);
    fails([{ ...good, client_auth: 'none' }], /client_auth must be/);
    fails([{ ...good, scopes: ['openid', 'a b'] }], /scopes/);
    expect(() => loadConfig({ OIDC_PROVIDERS_FILE: brokenJson })).toThrow(/not readable JSON/);
  });

  test('ASL_MODE and its signer', () => {
    expect(loadConfig({}).aslMode).toBe('off');
    expect(loadConfig({ ASL_MODE: 'required' })).toMatchObject({ aslMode: 'required', aslEnvironment: 0 });
    expect(() => loadConfig({ ASL_MODE: 'always' })).toThrow(/ASL_MODE: must be off, supported or required/);
    expect(() => loadConfig({ ASL_SIGNER_CERT: caPem })).toThrow(/ASL_SIGNER_KEY/);
    const key = file('asl-key.pem', crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
    expect(loadConfig({ ASL_SIGNER_CERT: caPem, ASL_SIGNER_KEY: key })).toMatchObject({ aslSignerCert: caPem, aslSignerKey: key });
    expect(() => loadConfig({ ASL_SIGNER_CERT: caPem, ASL_SIGNER_KEY: notPem })).toThrow(/not a PEM private key/);
  });
});
