import type { TestToken } from '../helpers/get-token';
import { institution } from './helpers';
import { listeningPep, rawCall, type ListeningPep } from './raw';

const latin1 = (bytes: number[]) => Buffer.from(bytes).toString('latin1');

/**
 * A chained parameter's type names the scope the request needs (system/<type>.s). Fuzz case 1:3685
 * (test/fuzz) had raw multibyte and invalid UTF-8 bytes in that type: the 403's WWW-Authenticate
 * could not be set (a character Node refuses in a header), and the rejection ended the process.
 */
describe('insufficient_scope for a type of characters a header cannot carry', () => {
  let p: ListeningPep;
  let t: TestToken;
  beforeAll(async () => {
    p = await listeningPep();
    t = await institution(p.h, { telematikId: '1-PEP-SCOPE-CHALLENGE' });
  });
  afterAll(() => p.close());

  test.each([
    [
      'the fuzz case: raw bytes in the chained type',
      `/fhir/Appointment?actor%3APractitio${latin1([0xf0, 0xb1, 0xa4, 0x82, 0xcf, 0x99, 0xf2, 0xab, 0x96, 0xb4, 0xf2, 0xbf, 0xba, 0xb1, 0xef, 0x98, 0x95])}1%80ner.identifier=Patient%2Fp1`,
    ],
    ['a percent-encoded emoji in the chained type', '/fhir/Appointment?actor:Practitio%F0%9F%98%80ner.identifier=x'],
    ['a quote and a backslash in the chained type', '/fhir/Appointment?actor:Fo%22o%5C.identifier=x'],
  ])('%s: 403 with a challenge of scope tokens (RFC 6749 §3.3), percent-encoded', async (_name, target) => {
    const res = await rawCall(p, t, 'GET', target);
    const challenge = res.headers['www-authenticate'];
    expect([res.status, res.body.error]).toEqual([403, 'insufficient_scope']);
    const scope = /^DPoP error="insufficient_scope", scope="([^"]*)", algs="ES256"$/.exec(challenge ?? '')?.[1];
    expect(scope).toMatch(/^system\/\S+\.s$/);
    expect(scope).toMatch(/^[\x21\x23-\x5b\x5d-\x7e]+$/);
    // The description names the scope as the request spelled it (JSON carries any character).
    expect(decodeURIComponent(scope!.replace(/%(?![0-9A-F]{2})/g, '%25'))).toBe(String(res.body.error_description).replace('the access token lacks the scope ', ''));
  });

  test('the server still answers afterwards', async () => {
    const res = await rawCall(p, t, 'GET', '/fhir/Appointment?_count=1');
    expect(res.status).toBe(200);
  });
});
