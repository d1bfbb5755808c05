import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { ClientInputError, createClient, GuardClient, Unreachable } from '../../src/client';
import { main } from '../../src/client/cli';
import { fhirUrl, type CliIo } from '../../src/client/cli-commands';
import { bundleSummary, resourceLine } from '../../src/client/summary';
import { createCardCa, issueCard } from '../../src/guard/pki/dev-pki';
import { freePort } from '../helpers/swtpm';

/**
 * What the reference client says about inputs it cannot use, before and instead of a request: card
 * and key files, the key store password, server addresses that answer nothing. No repository runs
 * here; the CLI runs in process through `main` with its own output.
 */
let dir: string;
const PASSWORD = 'a passphrase long enough';
const ca = createCardCa();
const card = issueCard(ca, { telematikId: '1-2-INPUTS', curve: 'P-256' });
const other = issueCard(ca, { telematikId: '1-2-OTHER', curve: 'P-256' });
const noAdmission = issueCard(ca, { telematikId: '1-2-NONE', curve: 'P-256', admission: false });

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'client-inputs-'));
  for (const [name, text] of Object.entries({ 'card.pem': card.certPem, 'card.key.pem': card.keyPem, 'other.key.pem': other.keyPem, 'plain.pem': noAdmission.certPem, 'plain.key.pem': noAdmission.keyPem, 'patient.json': '{"resourceType":"Patient"}' })) {
    fs.writeFileSync(path.join(dir, name), text);
  }
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const f = (name: string) => path.join(dir, name);

async function cli(args: string[], o: { password?: string; home?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: false };
  const saved = { home: process.env.TERMINUS_CLIENT_HOME, password: process.env.TERMINUS_CLIENT_PASSWORD };
  process.env.TERMINUS_CLIENT_HOME = o.home ?? f('home');
  process.env.TERMINUS_CLIENT_PASSWORD = o.password ?? PASSWORD;
  try {
    const code = await main(args, io);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    for (const [k, v] of [['TERMINUS_CLIENT_HOME', saved.home], ['TERMINUS_CLIENT_PASSWORD', saved.password]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('createClient checks its inputs when called', () => {
  test("the README's relative card paths name the file, where they were looked for and the working directory", async () => {
    const cwd = fs.mkdtempSync(path.join(dir, 'cwd-'));
    const spy = jest.spyOn(process, 'cwd').mockReturnValue(cwd);
    try {
      const readme = { server: 'http://localhost:8080', card: 'data/dev-pki/card-p256.pem', key: 'data/dev-pki/card-p256.key.pem', home: f('lib-home'), password: PASSWORD };
      const err = await createClient(readme).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ClientInputError);
      expect(err).toMatchObject({ option: 'card' });
      expect((err as Error).message).toBe(
        `the card certificate file data/dev-pki/card-p256.pem (${cwd}/data/dev-pki/card-p256.pem) does not exist (a relative path is resolved against the working directory ${cwd})`,
      );
      // The same options work once the files are where the working directory says.
      fs.mkdirSync(path.join(cwd, 'data', 'dev-pki'), { recursive: true });
      fs.copyFileSync(f('card.pem'), path.join(cwd, readme.card));
      fs.copyFileSync(f('card.key.pem'), path.join(cwd, readme.key));
      const session = await createClient(readme);
      session.close();
    } finally {
      spy.mockRestore();
    }
  });

  test.each([
    ['card is a JSON file', { card: 'patient.json' }, 'card', /^the card certificate file .+patient\.json is not PEM \(no "-----BEGIN" line\): expected a PEM certificate$/],
    ['card and key swapped', { card: 'card.key.pem', key: 'card.pem' }, 'card', /^the card certificate file .+card\.key\.pem holds a PEM PRIVATE KEY, expected a certificate \(certificate and key swapped\?\)$/],
    ['key of another card', { key: 'other.key.pem' }, 'key', /^the card key file .+other\.key\.pem does not belong to the card certificate file .+card\.pem$/],
    ['a certificate without admission', { card: 'plain.pem', key: 'plain.key.pem' }, 'card', /^the card certificate file .+plain\.pem has no admission extension \(Telematik-ID\): not an institution card$/],
    ['key is a folder', { key: '.' }, 'key', /^the card key file .+ is a folder, not a PEM private key file$/],
    ['broken PEM body', { card: '-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n' }, 'card', /^the card certificate PEM text is not a valid X\.509 certificate/],
  ])('%s: a ClientInputError naming the option and file', async (_, files, option, message) => {
    const at = (v: string | undefined, fallback: string) => (v === undefined ? f(fallback) : v.includes('-----BEGIN') ? v : v === '.' ? dir : f(v));
    const err = await createClient({ server: 'http://127.0.0.1:9', card: at((files as { card?: string }).card, 'card.pem'), key: at((files as { key?: string }).key, 'card.key.pem'), home: f('lib-home'), password: PASSWORD }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientInputError);
    expect(err).toMatchObject({ option, message: expect.stringMatching(message) });
  });

  test('server, password and helper files are checked too', async () => {
    const base = { server: 'http://localhost:8080', card: f('card.pem'), key: f('card.key.pem'), home: f('lib-home'), password: PASSWORD };
    await expect(createClient({ ...base, server: 'localhost:8080' })).rejects.toMatchObject({ option: 'server', message: expect.stringMatching(/is not an http\(s\) URL|is not a URL/) });
    const saved = process.env.TERMINUS_CLIENT_PASSWORD;
    delete process.env.TERMINUS_CLIENT_PASSWORD;
    try {
      await expect(createClient({ ...base, password: undefined })).rejects.toMatchObject({ option: 'password', message: expect.stringMatching(/password option or set TERMINUS_CLIENT_PASSWORD/) });
    } finally {
      if (saved !== undefined) process.env.TERMINUS_CLIENT_PASSWORD = saved;
    }
    await expect(createClient({ ...base, helper: { address: '127.0.0.1:50051', ca: f('missing-ca.pem'), cert: f('card.pem'), key: f('card.key.pem') } })).rejects.toMatchObject({
      option: 'helper.ca',
      message: expect.stringMatching(/^the helper's CA certificate file .+missing-ca\.pem does not exist/),
    });
  });
});

describe('the CLI names what it cannot use (exit 2)', () => {
  test('a one-letter TERMINUS_CLIENT_PASSWORD for a new key store', async () => {
    const r = await cli(['status', '--server', 'http://127.0.0.1:9'], { password: 'x', home: f('short-home') });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^terminus-client: TERMINUS_CLIENT_PASSWORD is too short for a new key store in .+short-home: 1 characters, at least 12/);
    expect(fs.existsSync(f('short-home/keystore.json'))).toBe(false);
  });

  test('a key file given as the card: the file and what was expected, no OpenSSL string', async () => {
    const r = await cli(['login', '--server', 'http://127.0.0.1:9', '--card', f('card.key.pem'), '--key', f('card.key.pem')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`terminus-client: the card certificate file ${f('card.key.pem')} holds a PEM PRIVATE KEY, expected a certificate (certificate and key swapped?)\n`);
    const json = await cli(['login', '--server', 'http://127.0.0.1:9', '--card', f('patient.json'), '--key', f('card.key.pem')]);
    expect(json.code).toBe(2);
    expect(json.stderr).not.toMatch(/PEM routines|no start line/);
    expect(json.stderr).toContain(`${f('patient.json')} is not PEM`);
  });

  test('a missing --data or --patient-file names the option and the file', async () => {
    const r = await cli(['http', 'POST', '/fhir', '--data', 'no-such-bundle.json', '--server', 'http://127.0.0.1:9', '--card', f('card.pem'), '--key', f('card.key.pem')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^terminus-client: --data no-such-bundle\.json \(.+no-such-bundle\.json\): no such file\n$/);
  });
});

describe('no answer: the URL and the cause instead of "fetch failed" (exit 2)', () => {
  let plain: http.Server;
  let plainPort: number;
  beforeAll(async () => {
    plain = http.createServer((_, res) => res.end('{}'));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    plainPort = (plain.address() as { port: number }).port;
  });
  afterAll(() => new Promise((r) => plain.close(r)));

  test('a stopped server or a wrong port: ECONNREFUSED', async () => {
    const port = await freePort();
    const r = await cli(['discover', '--server', `http://127.0.0.1:${port}`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`terminus-client: cannot reach http://127.0.0.1:${port}/.well-known/oauth-protected-resource: connection refused (ECONNREFUSED): nothing listens on 127.0.0.1:${port}; is the server running, and are host and port right?\n`);
  });

  test('a typo in the host: the name that does not resolve', async () => {
    const r = await cli(['discover', '--server', 'https://terminus-typo.invalid:8443']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^terminus-client: cannot reach https:\/\/terminus-typo\.invalid:8443\/\.well-known\/oauth-protected-resource: the host name terminus-typo\.invalid cannot be resolved \((ENOTFOUND|EAI_AGAIN)\); is it spelled right\?\n$/);
  });

  test('https against an http server: the TLS failure, during the login of a resource command', async () => {
    const r = await cli(['get', 'Schedule', '--server', `https://127.0.0.1:${plainPort}`, '--card', f('card.pem'), '--key', f('card.key.pem')], { home: f('tls-home') });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `terminus-client: cannot reach https://127.0.0.1:${plainPort}/.well-known/oauth-protected-resource: TLS handshake failed (ERR_SSL_WRONG_VERSION_NUMBER): the server at 127.0.0.1:${plainPort} does not speak https; is it an http:// server?\n`,
    );
  });

  test('the library throws an Unreachable with the URL and the code', async () => {
    const port = await freePort();
    const err = await new GuardClient({ server: `http://127.0.0.1:${port}`, retries: 0 }).discover().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Unreachable);
    expect(err).toMatchObject({ url: `http://127.0.0.1:${port}/.well-known/oauth-protected-resource`, code: 'ECONNREFUSED' });
  });
});

test.each([
  ['/fhir', 'http://x/fhir'],
  ['fhir', 'http://x/fhir'],
  ['/fhir/', 'http://x/fhir'],
  ['/fhir/Slot/1', 'http://x/fhir/Slot/1'],
  ['fhir/Slot?status=free', 'http://x/fhir/Slot?status=free'],
  ['/fhir?_format=json', 'http://x/fhir?_format=json'],
  ['Slot/1', 'http://x/fhir/Slot/1'],
  ['/metadata', 'http://x/fhir/metadata'],
  ['fhirish/1', 'http://x/fhir/fhirish/1'],
  ['https://other/fhir/Slot', 'https://other/fhir/Slot'],
])('the FHIR path %s is %s (with or without the /fhir prefix)', (p, url) => {
  expect(fhirUrl('http://x', p)).toBe(url);
});

describe('terminal summaries', () => {
  test.each([
    [{ resourceType: 'Slot', id: 's1', start: '2027-01-31T11:05:00Z', end: '2027-01-31T11:55:00Z', status: 'free', schedule: { reference: 'Schedule/x' } }, 'Slot/s1  2027-01-31 11:05-11:55Z  free  Schedule/x'],
    [{ resourceType: 'Slot', id: 's2', start: '2027-01-31T23:30:00+01:00', end: '2027-02-01T00:15:30+01:00', status: 'busy', schedule: { reference: 'Schedule/x' } }, 'Slot/s2  2027-01-31 23:30+01:00 - 2027-02-01 00:15:30+01:00  busy  Schedule/x'],
    [{ resourceType: 'Patient', id: 'p', name: [{ family: 'Muster', given: ['Erika'] }], birthDate: '1970-01-01', gender: 'female' }, 'Patient/p  Erika Muster  1970-01-01  female'],
    [{ resourceType: 'CapabilityStatement', status: 'active', name: 'Terminus', date: '2026-01-01' }, 'CapabilityStatement  active  Terminus  2026-01-01'],
    [{ resourceType: 'OperationOutcome', issue: [{ severity: 'error', diagnostics: 'no' }] }, 'OperationOutcome  error: no'],
  ])('%j reads %s', (resource, line) => {
    expect(resourceLine(resource)).toBe(line);
  });

  test('a search Bundle: the head, a line per entry, the next page', () => {
    const bundle = { resourceType: 'Bundle', type: 'searchset', total: 2, entry: [{ resource: { resourceType: 'Schedule', id: 'a', active: true, serviceType: [{ text: 'Neurologie' }] } }], link: [{ relation: 'next', url: 'http://x/fhir/Schedule?_page=2' }] };
    expect(bundleSummary(bundle, '1 Schedule entries of 2')).toBe('1 Schedule entries of 2\n  Schedule/a  active  Neurologie\n  more: http://x/fhir/Schedule?_page=2');
  });
});
