import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestToken } from '../helpers/get-token';
import { institution, pepHarness, proofFor, type PepHarness } from './helpers';
import { loopbackServer, type LoopbackServer } from './loopback';

interface Raw {
  status: number;
  contentType: string;
  body: Record<string, unknown>;
}

/**
 * Sends the request target byte for byte (supertest and fetch would normalise it), with a valid
 * token and a proof whose `htu` is the path as sent.
 */
async function rawCall(h: PepHarness, base: string, t: TestToken, method: string, target: string): Promise<Raw> {
  const proof = await proofFor(h, t.dpopKey, method, target.slice('/fhir'.length).split(/[?#]/)[0], t.accessToken);
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${target}`, { method, headers: { authorization: `DPoP ${t.accessToken}`, dpop: proof, accept: 'application/fhir+json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}

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
  let h: PepHarness;
  let t: TestToken;
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    h = await pepHarness();
    t = await institution(h, { telematikId: '1-PEP-MALFORMED' });
    server = http.createServer(h.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await h.close();
  });

  test.each(MALFORMED)('%s %s is 400 with an OperationOutcome', async (method, target, diagnostics) => {
    const res = await rawCall(h, base, t, method, target);
    expect(res.status).toBe(400);
    expect(res.contentType).toMatch(/^application\/fhir\+json/);
    expect(res.body.resourceType).toBe('OperationOutcome');
    const [issue] = res.body.issue as { severity: string; code: string; diagnostics: string }[];
    expect(issue).toMatchObject({ severity: 'error', code: 'invalid' });
    expect(issue.diagnostics).toMatch(diagnostics);
  });
});

describe('in proxy mode, a URL the enforcement point cannot decode is refused before the upstream', () => {
  let upstream: LoopbackServer;
  let h: PepHarness;
  let t: TestToken;
  let server: http.Server;
  let base: string;
  beforeAll(async () => {
    upstream = await loopbackServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/fhir+json' });
      res.end('{"resourceType":"Bundle","type":"searchset"}');
    });
    h = await pepHarness({ env: { UPSTREAM_URL: `${upstream.url}/fhir` } });
    t = await institution(h, { telematikId: '1-PEP-MALFORMED-PROXY' });
    server = http.createServer(h.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await h.close();
    await upstream.close();
  });

  test.each(MALFORMED)('%s %s is 400 invalid_request, nothing forwarded', async (method, target, diagnostics) => {
    const before = upstream.requests.length;
    const res = await rawCall(h, base, t, method, target);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_description).toMatch(diagnostics);
    expect(upstream.requests.length).toBe(before);
  });
});
