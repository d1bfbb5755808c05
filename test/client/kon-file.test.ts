import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { readKonFile, substituteVariables } from '../../src/client/card/konnektor/kon-file';
import { ClientInputError } from '../../src/client/input-error';
import { createCardCa } from '../../src/guard/pki/dev-pki';

// gematik's .kon format 1.0.0 as zeta-cli documents it: the document's own complete example,
// ${VAR} substitution before parsing, every field error at once.

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kon-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const caDer = new crypto.X509Certificate(createCardCa().certPem).raw;
function write(content: string | object, name = `${crypto.randomUUID()}.kon`): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}
function failure(file: string, env: NodeJS.ProcessEnv = {}): ClientInputError {
  try {
    readKonFile(file, env);
  } catch (err) {
    if (err instanceof ClientInputError) return err;
    throw err;
  }
  throw new Error('accepted');
}

test("the format document's complete example reads as written", () => {
  const p12 = Buffer.from('not checked until the connection is made');
  const file = write({
    version: '1.0.0',
    url: 'https://konnektor.example.com:8443/',
    rewriteServiceEndpoints: false,
    mandantId: 'M1',
    workplaceId: 'W1',
    clientSystemId: 'C1',
    userId: 'U1',
    telematikId: '2-2134567890',
    credentials: { type: 'pkcs12', data: p12.toString('base64').replace(/(.{16})/g, '$1\n'), password: '00' },
    env: 'ru',
    insecureSkipVerify: false,
    expectedHost: 'konnektor.example.com',
    trustStore: [caDer.toString('base64'), caDer.toString('base64').replace(/(.{64})/g, '$1\r\n')],
  });
  expect(readKonFile(file, {})).toEqual({
    version: '1.0.0',
    url: 'https://konnektor.example.com:8443',
    rewriteServiceEndpoints: false,
    mandantId: 'M1',
    workplaceId: 'W1',
    clientSystemId: 'C1',
    userId: 'U1',
    telematikId: '2-2134567890',
    credentials: { type: 'pkcs12', data: p12, password: '00' },
    env: 'ru',
    insecureSkipVerify: false,
    expectedHost: 'konnektor.example.com',
    trustStore: [caDer, caDer],
  });
});

test('${VAR} is replaced in the raw text before parsing, anywhere; an unset one becomes empty and fails as a missing field', () => {
  const text = '{"url": "https://${KONNEKTOR_HOST}:${KONNEKTOR_PORT}", "mandantId": "M1", "workplaceId": "W1", "clientSystemId": "C1", "env": "${TI_ENV}", ' + '"credentials": {"type": "basic", "username": "user", "password": "${KONNEKTOR_AUTH_BASIC_PASSWORD}"}}';
  const file = write(text);
  expect(readKonFile(file, { KONNEKTOR_HOST: '10.0.0.5', KONNEKTOR_PORT: '443', TI_ENV: 'tu', KONNEKTOR_AUTH_BASIC_PASSWORD: 'geheim' })).toMatchObject({ url: 'https://10.0.0.5:443', env: 'tu', credentials: { type: 'basic', username: 'user', password: 'geheim' } });
  expect(failure(file, { KONNEKTOR_HOST: '10.0.0.5', KONNEKTOR_PORT: '443', TI_ENV: 'tu' }).message).toBe(`invalid .kon configuration ${file}:\n  - credentials.password is required for basic credentials`);
  expect(substituteVariables('$X ${} $${A} ${A}${B}', { A: 'a${B}', B: 'b' })).toBe('$X ${} $a${B} a${B}b');
});

test('every field error is reported at once, in one message naming the file', () => {
  const file = write({ url: 'konnektor.example.com', mandantId: ' ', clientSystemId: 7, env: 'prod', credentials: { type: 'basic' }, insecureSkipVerify: 'yes', trustStore: ['***', Buffer.from('no certificate').toString('base64')] });
  const err = failure(file);
  expect(err.option).toBe('konnektor');
  expect(err.message.split('\n')).toEqual([
    `invalid .kon configuration ${file}:`,
    '  - "url" must be an http(s) URL with the Konnektor\'s host, got "konnektor.example.com"',
    '  - "env" must be one of ru, tu, pu (got "prod")',
    '  - "mandantId" is required',
    '  - "workplaceId" is required',
    '  - "clientSystemId" must be a string',
    '  - credentials.username is required for basic credentials',
    '  - credentials.password is required for basic credentials',
    '  - "insecureSkipVerify" must be true or false',
    '  - trustStore[0] is not valid base64',
    '  - trustStore[1] is not a DER X.509 certificate',
  ]);
});

test.each<[string, object | string, RegExp]>([
  ['an unknown credentials type', { url: 'https://k', mandantId: 'M', workplaceId: 'W', clientSystemId: 'C', credentials: { type: 'kerberos' } }, /credentials\.type "kerberos" is not supported \(must be basic, pkcs12 or system\)/],
  ['no credentials type', { url: 'https://k', mandantId: 'M', workplaceId: 'W', clientSystemId: 'C', credentials: {} }, /credentials\.type is required/],
  ['pkcs12 data that is not base64', { url: 'https://k', mandantId: 'M', workplaceId: 'W', clientSystemId: 'C', credentials: { type: 'pkcs12', data: 'not base64!' } }, /credentials\.data is not valid base64/],
  ['system credentials without a name', { url: 'https://k', mandantId: 'M', workplaceId: 'W', clientSystemId: 'C', credentials: { type: 'system' } }, /credentials\.name is required for system credentials/],
  ['text that is not JSON', '{"url": "https://k",}', /is not JSON after \$\{VAR\} substitution/],
  ['an array', '[]', /the document must be a JSON object/],
])('%s is refused', (_name, content, message) => {
  expect(failure(write(content)).message).toMatch(message);
});

test('a .kony file is refused with a clear message; a missing file names its path', () => {
  expect(failure(write('url: https://k', 'x.kony')).message).toMatch(/YAML \(\.kony\) is not supported here/);
  expect(failure(path.join(dir, 'none.kon')).message).toMatch(/^the \.kon file .+none\.kon does not exist$/);
});
