/**
 * Each extension point is one entry: a FHIR operation, an attestation method and a grant are
 * defined below in one place each, handed to the application's composition once, and then
 * route, need their scopes, show in the CapabilityStatement, register, and answer at the token
 * endpoint and in discovery without a second file edited.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Bundle, CapabilityStatement, OperationDefinition, Parameters } from '@medplum/fhirtypes';
import type { Express } from 'express';
import request from 'supertest';
import type { AppContext } from '../src/context';
import { createClientAssertion, createDpopProof, generateEcKey } from '../src/client/crypto';
import { composeTerminus } from '../src/app';
import { importResources, type FhirEnv } from '../src/fhir';
import { definitionOf, fhirOperations, parseInputParameters, type Operation } from '../src/fhir/operations';
import { AttestationMethods, type AttestationMethod } from '../src/guard/attestation';
import { defineGrant, tokenGrants } from '../src/guard/authserver/grants';
import { InvalidRequest } from '../src/guard/errors';
import { TOKEN_TYPE_ACCESS_TOKEN } from '../src/common/oauth';
import { scopeNeed } from '../src/common/smart-scopes';
import { exchange, fetchNonce, guardHarness, JWT_BEARER, nowSec, registerClient, type Harness } from './guard/helpers/harness';
import { getTestToken, type TestToken } from './guard/helpers/get-token';

/** A FHIR operation: how many free Slots the caller may see, optionally of one Schedule. */
const COUNT_FREE = {
  resourceType: 'OperationDefinition',
  url: 'http://terminus.local/fhir/OperationDefinition/count-free',
  name: 'CountFree',
  status: 'active',
  kind: 'operation',
  code: 'count-free',
  resource: ['Slot'],
  system: false,
  type: true,
  instance: false,
  affectsState: false,
  parameter: [
    { name: 'schedule', use: 'in', min: 0, max: '1', type: 'Reference' },
    { name: 'count', use: 'out', min: 1, max: '1', type: 'integer' },
  ],
} as const satisfies OperationDefinition;

const countFree: Operation = {
  definition: definitionOf(COUNT_FREE),
  scopes: () => [scopeNeed('Slot', 's')],
  async handler(req, env) {
    const { schedule } = parseInputParameters(COUNT_FREE, req);
    const filters = [{ chain: [], param: 'status', values: ['free'] }, ...(schedule?.reference ? [{ chain: [], param: 'schedule', values: [schedule.reference] }] : [])];
    const found = await env.repo.search({ resourceType: 'Slot', filters, count: 0, offset: 0, sort: [], include: [], revinclude: [], totalOnly: true }, req.caller);
    const body: Parameters = { resourceType: 'Parameters', parameter: [{ name: 'count', valueInteger: found.total }] };
    return { status: 200, body };
  },
};

/** An attestation method: the client proves it knows a secret shared with the operator; its statements are software ones. */
const sharedSecret: AttestationMethod = {
  type: 'shared_secret',
  hardware: false,
  fields: ['shared_secret'],
  userEmail: 'refused',
  registration: {
    async verify(body) {
      if (body.shared_secret !== 'open sesame') throw new InvalidRequest('shared_secret is wrong');
      return { attestation: { shared_secret: { verified: true } } };
    },
  },
};

/** A grant: answers with what the token endpoint handed it, once the proof's nonce and the client are checked. */
const CLIENT_CREDENTIALS = 'client_credentials';
const clientCredentials = defineGrant({
  type: CLIENT_CREDENTIALS,
  parameters: ['scope'],
  nonce: 'required',
  clientAuthentication: 'fresh',
  handle: async (_deps, r) => ({
    access_token: JSON.stringify({ client: r.auth.client.clientId, nonce: r.nonce, params: [...r.params.keys()] }),
    issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
    token_type: 'DPoP',
    expires_in: 0,
    scope: r.params.get('scope') ?? '',
  }),
});

/** The whole application composed with the three entries, one place each. */
let fhir: FhirEnv;
function composed(ctx: AppContext): Express {
  const terminus = composeTerminus(ctx, { operations: [countFree], attestationMethods: [sharedSecret], grants: [clientCredentials] });
  fhir = terminus.fhir;
  return terminus.app;
}

let h: Harness;
beforeAll(async () => {
  h = await guardHarness({ env: { GUARD_ENFORCEMENT: 'on' }, app: composed });
});
afterAll(() => h.close());

async function fhirGet(t: TestToken, path: string): Promise<request.Response> {
  const proof = await t.makeProof('GET', `${h.resource}${path}`, t.accessToken);
  return request(h.app).get(`/fhir${path}`).set('Authorization', `DPoP ${t.accessToken}`).set('DPoP', proof);
}

const registration = async (members: Record<string, unknown>) => {
  const key = await generateEcKey();
  const body = { client_name: 'extension', token_endpoint_auth_method: 'private_key_jwt', grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'], jwks: { keys: [key.publicJwk] }, ...members };
  return { key, res: await request(h.app).post('/svc/v1/register').send(body) };
};

describe('a FHIR operation in one module', () => {
  beforeAll(async () => {
    // The ISiK fixture: Schedule-Read-Example with two free Slots and a busy one.
    await importResources(fhir, JSON.parse(fs.readFileSync(path.join(__dirname, '../fixtures/isik-stufe5.json'), 'utf8')) as Bundle);
  });

  test('routes, GET included (it does not affect state), with its Parameters read by its definition', async () => {
    const t = await getTestToken(h.app, h.ctx, { telematikId: '1-EXT-SLOTS', scope: 'system/Slot.rs' });
    const ofSchedule = await fhirGet(t, '/Slot/$count-free?schedule=Schedule/Schedule-Read-Example');
    expect([ofSchedule.status, ofSchedule.body]).toEqual([200, { resourceType: 'Parameters', parameter: [{ name: 'count', valueInteger: 2 }] }]);
    const ofNone = await fhirGet(t, '/Slot/$count-free?schedule=Schedule/no-such-schedule');
    expect(ofNone.body.parameter).toEqual([{ name: 'count', valueInteger: 0 }]);
    const unknown = await fhirGet(t, '/Slot/$count-free?status=busy');
    expect([unknown.status, unknown.body.issue[0].diagnostics]).toEqual([400, 'Unknown $count-free parameter "status": the parameters of $count-free are schedule']);
  });

  test('needs the scope it declares: without system/Slot.s 403 insufficient_scope', async () => {
    const t = await getTestToken(h.app, h.ctx, { telematikId: '1-EXT-SCHEDULES', scope: 'system/Schedule.rs' });
    const res = await fhirGet(t, '/Slot/$count-free');
    expect([res.status, res.body.error, res.body.error_description]).toEqual([403, 'insufficient_scope', 'the access token lacks the scope system/Slot.s']);
  });

  test('the CapabilityStatement names it on its type', async () => {
    const cs = (await request(h.app).get('/fhir/metadata')).body as CapabilityStatement;
    expect(cs.rest![0].resource!.find((r) => r.type === 'Slot')!.operation).toContainEqual({ name: 'count-free', definition: COUNT_FREE.url });
  });
});

describe('an attestation method in one entry', () => {
  test('registration accepts its type with its proof, and its client exchanges tokens', async () => {
    const { key, res } = await registration({ attestation_type: 'shared_secret', shared_secret: 'open sesame' });
    expect(res.status).toBe(201);
    const { res: tokens } = await exchange(h, { client: { clientId: res.body.client_id, clientKey: key } });
    expect([tokens.status, tokens.body.token_type]).toEqual([200, 'DPoP']);
  });

  test('its verifier refuses a wrong proof; its fields are proof members a software registration may not carry', async () => {
    const wrong = await registration({ attestation_type: 'shared_secret', shared_secret: 'guess' });
    expect([wrong.res.status, wrong.res.body.error_description]).toEqual([400, 'shared_secret is wrong']);
    const software = await registration({ shared_secret: 'open sesame' });
    expect([software.res.status, software.res.body.error_description]).toEqual([400, 'a software registration must not carry shared_secret']);
  });

  test('discovery lists it among the types this server registers', async () => {
    const meta = await request(h.app).get('/.well-known/oauth-authorization-server');
    expect(meta.body.attestation_types_supported).toEqual(['software', 'shared_secret']);
  });
});

describe('a grant in one entry', () => {
  const tokenRequest = async (o: { nonce?: boolean } = {}) => {
    const client = await registerClient(h, [CLIENT_CREDENTIALS]);
    const nonce = await fetchNonce(h);
    const proof = await createDpopProof(await generateEcKey(), { method: 'POST', url: h.urls.token, nonce: o.nonce === false ? undefined : nonce, iat: nowSec(h) });
    const assertion = await createClientAssertion(client.clientKey, { clientId: client.clientId, audience: h.urls.token, now: nowSec(h) });
    const form = new URLSearchParams({ grant_type: CLIENT_CREDENTIALS, client_assertion_type: JWT_BEARER, client_assertion: assertion, scope: 'system/Slot.rs', resource: h.resource });
    const res = await request(h.app).post('/svc/v1/token').type('form').set('DPoP', proof).send(form.toString());
    return { res, client, nonce };
  };

  test('the token endpoint dispatches to it with the nonce consumed, the client authenticated and only the parameters it declares', async () => {
    const { res, client, nonce } = await tokenRequest();
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.access_token)).toEqual({ client: client.clientId, nonce, params: ['scope'] });
    expect(res.body.scope).toBe('system/Slot.rs');
  });

  test('a proof without the nonce it requires: 400 use_dpop_nonce', async () => {
    const { res } = await tokenRequest({ nonce: false });
    expect([res.status, res.body.error]).toEqual([400, 'use_dpop_nonce']);
  });

  test('registration accepts it as a grant type, and discovery lists it', async () => {
    const { res } = await registration({ grant_types: [CLIENT_CREDENTIALS] });
    expect([res.status, res.body.grant_types]).toEqual([201, [CLIENT_CREDENTIALS]]);
    const meta = await request(h.app).get('/.well-known/oauth-authorization-server');
    expect(meta.body.grant_types_supported).toEqual(['urn:ietf:params:oauth:grant-type:token-exchange', 'authorization_code', 'refresh_token', CLIENT_CREDENTIALS]);
  });
});

describe('an entry that would shadow another is refused when the application is composed', () => {
  test.each([
    ['a second $book on Appointment', () => fhirOperations([{ ...countFree, definition: { ...countFree.definition, code: 'book', resource: ['Appointment'] } }]), /two operations \$book on Appointment/],
    ['a second attestation method of one type', () => new AttestationMethods([sharedSecret, { ...sharedSecret }]), /two attestation methods of type shared_secret/],
    ['a second refresh_token grant after the one that takes every request', () => tokenGrants([{ ...clientCredentials, type: 'refresh_token' }]), /the grant refresh_token is registered twice/],
  ])('%s', (_name, compose, message) => {
    expect(compose).toThrow(message);
  });
});
