import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodePayload, exchange, guardHarness, loggedInClient, refreshWith, type Harness } from './helpers/harness';

/**
 * POLICY_ENGINE_URL mode (docs/requirements.md#policy-engine) against a real HTTP server speaking
 * OPA's data API: POST /v1/data/authz with {input}, answering {result}. Fails closed with 503.
 */
interface Opa {
  url: string;
  inputs: Record<string, any>[];
  answer: (input: Record<string, any>) => { status?: number; body?: unknown; delayMs?: number };
  close(): Promise<void>;
}

async function fakeOpa(): Promise<Opa> {
  const opa: Partial<Opa> & { inputs: Record<string, any>[] } = { inputs: [], answer: () => ({ body: { result: { allow: true } } }) };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/data/authz') {
        res.writeHead(404).end('{}');
        return;
      }
      const input = JSON.parse(raw).input;
      opa.inputs.push(input);
      const a = opa.answer!(input);
      setTimeout(() => {
        res.writeHead(a.status ?? 200, { 'content-type': 'application/json' });
        res.end(typeof a.body === 'string' ? a.body : JSON.stringify(a.body ?? {}));
      }, a.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  opa.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  opa.close = () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  return opa as Opa;
}

let opa: Opa;
let h: Harness;
beforeAll(async () => {
  opa = await fakeOpa();
  h = await guardHarness({ env: { POLICY_ENGINE_URL: opa.url } });
});
afterAll(async () => {
  await h.close();
  await opa.close();
});
beforeEach(() => {
  opa.inputs.length = 0;
  opa.answer = () => ({ body: { result: { allow: true, ttl: { access_token: 60, refresh_token: 120 } } } });
});

test('token lifetimes come from the decision (A_28527)', async () => {
  const { res } = await exchange(h);
  expect(res.status).toBe(200);
  expect(res.body.expires_in).toBe(60);
  expect(res.body.refresh_expires_in).toBe(120);
  const at = decodePayload(res.body.access_token);
  expect((at.exp as number) - (at.iat as number)).toBe(60);
});

test('the input carries the registration, the card identity, the posture and the client IP from Forwarded', async () => {
  const { res, client } = await exchange(h, { telematikId: '1-OPA-PRAXIS', headers: { Forwarded: 'for=198.51.100.60;proto=https' } });
  expect(res.status).toBe(200);
  expect(opa.inputs).toHaveLength(1);
  const input = opa.inputs[0];
  expect(input).toMatchObject({
    version: '1.1',
    client_registration_data: {
      client_id: client.clientId,
      product_id: 'terminus-client',
      product_version: '0.1.0',
      platform: 'linux',
      posture_type: 'software',
      attestation_result: { software: { binding_verified: true } },
    },
    user_info: { identifier: '1-OPA-PRAXIS', professionOID: '1.2.276.0.76.4.50', commonName: 'Praxis 1-OPA-PRAXIS', organizationName: 'Praxis 1-OPA-PRAXIS', repository_owner: false },
    authorization_request: {
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      ip_address: '198.51.100.60',
      resource: h.resource,
      audience: [h.resource],
    },
  });
  expect(input.authorization_request.scopes).toContain('system/Appointment.crus');
});

test.each([
  ['reasons as an array', ['User profession is not allowed'], ['User profession is not allowed']],
  ['reasons as a map', { 'Client product or version is not allowed': true }, ['Client product or version is not allowed']],
  ['reasons as a string', 'One or more requested audiences are not allowed', ['One or more requested audiences are not allowed']],
])('a deny with %s is 403 access_denied, reasons echoed, no tokens (A_25752-01)', async (_n, reasons, expected) => {
  opa.answer = () => ({ body: { result: { allow: false, reasons } } });
  const { res } = await exchange(h);
  expect(res.status).toBe(403);
  expect(res.body.error).toBe('access_denied');
  expect(res.body.reasons).toEqual(expected);
  expect(res.body.access_token).toBeUndefined();
  expect(res.body.refresh_token).toBeUndefined();
});

test('a deny leaves the client pending_attestation', async () => {
  opa.answer = () => ({ body: { result: { allow: false, reasons: ['no'] } } });
  const { client } = await exchange(h);
  const r = await h.ctx.db.query<{ status: string }>('SELECT status FROM guard_client WHERE client_id = $1', [client.clientId]);
  expect(r.rows[0].status).toBe('pending_attestation');
});

test.each<[string, Opa['answer']]>([
  ['OPA answers 500', () => ({ status: 500, body: { code: 'internal_error' } })],
  ['OPA answers no result (policy not loaded)', () => ({ body: {} })],
  ['OPA answers garbage', () => ({ body: 'not json' })],
  ['OPA is slower than the 2 s timeout', () => ({ delayMs: 2500, body: { result: { allow: true } } })],
])('fails closed when %s: 503 temporarily_unavailable', async (_n, answer) => {
  opa.answer = answer;
  const { res } = await exchange(h);
  expect(res.status).toBe(503);
  expect(res.body.error).toBe('temporarily_unavailable');
  expect(res.body.access_token).toBeUndefined();
});

test('fails closed when OPA is unreachable', async () => {
  const down = await guardHarness({ env: { POLICY_ENGINE_URL: 'http://127.0.0.1:9' } });
  try {
    const { res } = await exchange(down);
    expect(res.status).toBe(503);
    expect(res.body.error).toBe('temporarily_unavailable');
  } finally {
    await down.close();
  }
});

test('refresh asks the policy again with the same identity; a deny is 403 access_denied', async () => {
  opa.answer = () => ({ body: { result: { allow: true } } });
  const c = await loggedInClient(h, { telematikId: '1-REFRESH-OPA' });
  opa.inputs.length = 0;
  const first = await refreshWith(h, c);
  expect(first.status).toBe(200);
  expect(opa.inputs[0]).toMatchObject({
    user_info: { identifier: '1-REFRESH-OPA', commonName: 'Praxis 1-REFRESH-OPA', professionOID: '1.2.276.0.76.4.50' },
    authorization_request: { grant_type: 'refresh_token' },
    client_registration_data: { client_id: c.clientId },
  });
  opa.answer = () => ({ body: { result: { allow: false, reasons: ['User is on the blocklist'] } } });
  const denied = await refreshWith(h, c, { refreshToken: first.body.refresh_token });
  expect(denied.status).toBe(403);
  expect(denied.body.error).toBe('access_denied');
  expect(denied.body.reasons).toEqual(['User is on the blocklist']);
});
