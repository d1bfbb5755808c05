import type { TestToken } from '../helpers/get-token';
import { institution } from './helpers';
import { loopbackServer, type LoopbackServer } from './loopback';
import { listeningPep, rawCall, type ListeningPep } from './raw';

// Request targets an outside fuzzer sent with valid sessions; each answered 500 server_error.
const MALFORMED: [string, string, RegExp][] = [
  ['GET', '/fhir/Slot?_type:not-in=&&&&==&;;&#', /no name/],
  ['GET', '/fhir/Slot/%ff%fe', /percent-encoding/],
  ['PATCH', '/fhir/Appointment/x%ED%BF%BFy', /percent-encoding/],
  ['GET', '/fhir/Appointment/?identifier:below=%00', /NUL/],
  ['GET', '/fhir/Slot?=free', /no name/],
  ['GET', '/fhir/Appointment?patient.identifier%00=x', /NUL/],
];

describe('a URL the FHIR layer cannot decode, with a valid session', () => {
  let p: ListeningPep;
  let t: TestToken;
  beforeAll(async () => {
    p = await listeningPep();
    t = await institution(p.h, { telematikId: '1-PEP-MALFORMED' });
  });
  afterAll(() => p.close());

  test.each(MALFORMED)('%s %s is 400 with an OperationOutcome', async (method, target, diagnostics) => {
    const res = await rawCall(p, t, method, target);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
    expect(res.body.resourceType).toBe('OperationOutcome');
    const [issue] = res.body.issue as { severity: string; code: string; diagnostics: string }[];
    expect(issue).toMatchObject({ severity: 'error', code: 'invalid' });
    expect(issue.diagnostics).toMatch(diagnostics);
  });
});

describe('in proxy mode, a URL the enforcement point cannot decode is refused before the upstream', () => {
  let upstream: LoopbackServer;
  let p: ListeningPep;
  let t: TestToken;
  beforeAll(async () => {
    upstream = await loopbackServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/fhir+json' });
      res.end('{"resourceType":"Bundle","type":"searchset"}');
    });
    p = await listeningPep({ env: { UPSTREAM_URL: `${upstream.url}/fhir` } });
    t = await institution(p.h, { telematikId: '1-PEP-MALFORMED-PROXY' });
  });
  afterAll(async () => {
    await p.close();
    await upstream.close();
  });

  test.each(MALFORMED)('%s %s is 400 invalid_request, nothing forwarded', async (method, target, diagnostics) => {
    const before = upstream.requests.length;
    const res = await rawCall(p, t, method, target);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_description).toMatch(diagnostics);
    expect(upstream.requests.length).toBe(before);
  });
});
