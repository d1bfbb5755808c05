import express from 'express';
import request from 'supertest';
import { API_VERSION, guardRouter } from '../../src/guard';
import { endpoints } from '../../src/guard/settings';
import type { ApiVersion } from '../../src/guard/versions';
import { exchange, guardHarness, type Harness } from './helpers/harness';

/** Discovery documents and versioning (docs/requirements.md#discovery-and-versioning). */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness();
});
afterAll(() => h.close());

describe('RFC 8414 authorization-server metadata', () => {
  test('names every guard endpoint under /svc/v1', async () => {
    const res = await request(h.app).get('/.well-known/oauth-authorization-server');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.headers['svc-api-version']).toBe(API_VERSION);
    expect(res.headers['cache-control']).toMatch(/^public, max-age=\d+$/);
    expect(res.body).toMatchObject({
      issuer: h.publicUrl,
      token_endpoint: `${h.publicUrl}/svc/v1/token`,
      nonce_endpoint: `${h.publicUrl}/svc/v1/nonce`,
      registration_endpoint: `${h.publicUrl}/svc/v1/register`,
      revocation_endpoint: `${h.publicUrl}/svc/v1/revoke`,
      jwks_uri: `${h.publicUrl}/svc/v1/jwks`,
      grant_types_supported: ['urn:ietf:params:oauth:grant-type:token-exchange', 'authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      token_endpoint_auth_signing_alg_values_supported: ['ES256'],
      dpop_signing_alg_values_supported: ['ES256'],
      api_versions_supported: [{ major_version: 1, version: API_VERSION, status: 'stable', documentation_uri: `${h.publicUrl}/svc/v1` }],
    });
    expect(res.body.scopes_supported).toContain('system/*.cruds');
    expect(res.body.scopes_supported).toContain('patient/Appointment.crus');
  });

  test('has exactly the fields of RFC 8414 and ZETA as-well-known.yaml, plus the DPoP and revocation extensions', async () => {
    const res = await request(h.app).get('/.well-known/oauth-authorization-server');
    expect(Object.keys(res.body).sort()).toEqual(
      [
        // RFC 8414, ZETA api_versions_supported
        'issuer',
        'authorization_endpoint',
        'token_endpoint',
        'registration_endpoint',
        'jwks_uri',
        'response_types_supported',
        'response_modes_supported',
        'grant_types_supported',
        'token_endpoint_auth_methods_supported',
        'token_endpoint_auth_signing_alg_values_supported',
        'service_documentation',
        'code_challenge_methods_supported',
        'api_versions_supported',
        // ZETA as-well-known.yaml
        'nonce_endpoint',
        'revocation_endpoint',
        'scopes_supported',
        // RFC 8414 §2, RFC 9449 §5.1, this server's token exchange
        'revocation_endpoint_auth_methods_supported',
        'revocation_endpoint_auth_signing_alg_values_supported',
        'dpop_signing_alg_values_supported',
        'subject_token_signing_alg_values_supported',
        'attestation_types_supported',
        // authorization code with PAR and PKCE (docs/requirements.md#patients-authorization-code-flow)
        'pushed_authorization_request_endpoint',
        'require_pushed_authorization_requests',
        'redirection_endpoint',
        'openid_providers_endpoint',
        'authorization_response_iss_parameter_supported',
      ].sort(),
    );
    expect(res.body).toMatchObject({
      authorization_endpoint: `${h.publicUrl}/svc/v1/authorize`,
      pushed_authorization_request_endpoint: `${h.publicUrl}/svc/v1/par`,
      require_pushed_authorization_requests: true,
      redirection_endpoint: `${h.publicUrl}/svc/v1/redirect`,
      openid_providers_endpoint: `${h.publicUrl}/svc/v1/openid-providers`,
      authorization_response_iss_parameter_supported: true,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      service_documentation: `${h.publicUrl}/svc/v1`,
    });
  });

  test('every advertised URL answers: the authorization_endpoint without a pushed request with 400 invalid_request', async () => {
    const meta = (await request(h.app).get('/.well-known/oauth-authorization-server')).body;
    const authorize = await request(h.app).get(`${new URL(meta.authorization_endpoint).pathname}?response_type=code&client_id=x`);
    expect(authorize.status).toBe(400);
    expect(authorize.body.error).toBe('invalid_request');
    expect(authorize.body.error_description).toMatch(/request_uri is required/);
    const providers = await request(h.app).get(new URL(meta.openid_providers_endpoint).pathname);
    expect(providers.status).toBe(200);
    expect(providers.body).toEqual([]);
    const docs = await request(h.app).get(new URL(meta.service_documentation).pathname);
    expect(docs.status).toBe(200);
    expect(docs.body.token).toBe(meta.token_endpoint);
  });

  test('the jwks_uri answers the ES256 signing key with Cache-Control', async () => {
    const meta = (await request(h.app).get('/.well-known/oauth-authorization-server')).body;
    const res = await request(h.app).get(new URL(meta.jwks_uri).pathname);
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toMatch(/^public, max-age=\d+$/);
    expect(res.body.keys.length).toBeGreaterThanOrEqual(1);
    expect(res.body.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(res.body.keys[0].kid).toEqual(expect.any(String));
    expect(res.body.keys[0].d).toBeUndefined();
  });
});

describe('RFC 9728 protected-resource metadata', () => {
  test.each(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/fhir'])('%s names the FHIR base and one AS (RFC 9728)', async (path) => {
    const res = await request(h.app).get(path);
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toMatch(/^public, max-age=\d+$/);
    expect(res.body).toMatchObject({
      resource: `${h.publicUrl}/fhir`,
      authorization_servers: [h.publicUrl],
      dpop_signing_alg_values_supported: ['ES256'],
      dpop_bound_access_tokens_required: true,
      bearer_methods_supported: ['header'],
      svc_asl_use: 'not_supported',
      api_versions_supported: [{ major_version: 1, version: API_VERSION, status: 'stable', documentation_uri: `${h.publicUrl}/svc/v1` }],
    });
    expect(res.body.scopes_supported).toContain('system/Appointment.crus');
  });
});

describe.each(['/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', '/svc/v1/jwks'])('caching of %s', (path) => {
  test('a matching If-None-Match is 304 with an empty body and the same ETag', async () => {
    const first = await request(h.app).get(path);
    const etag = first.headers.etag;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const second = await request(h.app).get(path).set('If-None-Match', etag);
    expect(second.status).toBe(304);
    expect(second.text).toBe('');
    expect(second.headers.etag).toBe(etag);
    const weak = await request(h.app).get(path).set('If-None-Match', `W/${etag}`);
    expect(weak.status).toBe(304);
  });

  test('an unknown If-None-Match is 200 with the same body and ETag', async () => {
    const first = await request(h.app).get(path);
    const res = await request(h.app).get(path).set('If-None-Match', 'invalid-etag');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(first.body);
    expect(res.headers.etag).toBe(first.headers.etag);
  });
});

test('error_uri resolves: GET /svc/v1/errors lists every code with its status', async () => {
  const res = await request(h.app).get('/svc/v1/errors');
  expect(res.status).toBe(200);
  expect(res.body.errors.invalid_dpop_proof).toEqual({ status: 400, meaning: expect.any(String) });
  expect(res.body.errors.rate_limit_exceeded.status).toBe(429);
});

describe('versioning', () => {
  test('every guard response carries SVC-API-Version, errors too', async () => {
    for (const res of [await request(h.app).get('/svc/v1/nonce'), await request(h.app).post('/svc/v1/token').send('x'), await request(h.app).get('/svc/v1/nope')]) {
      expect(res.headers['svc-api-version']).toBe(API_VERSION);
    }
  });

  test('an unknown major version is 404 resource_not_found', async () => {
    const res = await request(h.app).get('/svc/v2/nonce');
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('resource_not_found');
  });

  test('a deprecated major is served with a Warning header; a shut-down major answers 410', async () => {
    const app = express();
    app.use(
      guardRouter(h.ctx, {
        versions: [
          { major: 1, version: '1.4.2', status: 'deprecated' },
          { major: 2, version: '2.0.0', status: 'stable' },
          { major: 0, version: '0.9.0', status: 'shut_down' },
        ],
      }),
    );
    const v1 = await request(app).get('/svc/v1/nonce');
    expect(v1.status).toBe(200);
    expect(v1.headers.warning).toMatch(/^299 - "API v1 is deprecated/);
    const v2 = await request(app).get('/svc/v2/nonce');
    expect(v2.status).toBe(200);
    expect(v2.headers.warning).toBeUndefined();
    const v0 = await request(app).get('/svc/v0/nonce');
    expect(v0.status).toBe(410);
    const meta = await request(app).get('/.well-known/oauth-authorization-server');
    expect(meta.body.token_endpoint).toBe(`${h.publicUrl}/svc/v2/token`);
    expect(meta.body.api_versions_supported.map((v: { major_version: number; status: string }) => [v.major_version, v.status])).toEqual([
      [1, 'deprecated'],
      [2, 'stable'],
    ]);
  });
});

describe('two majors served at once (v1 deprecated, v2 stable)', () => {
  const versions: ApiVersion[] = [
    { major: 1, version: '1.4.2', status: 'deprecated' },
    { major: 2, version: '2.0.0', status: 'stable' },
    { major: 0, version: '0.9.0', status: 'shut_down' },
  ];
  let h2: Harness;
  beforeAll(async () => {
    h2 = await guardHarness({
      db: h.ctx.db,
      app: (ctx) => {
        const app = express();
        app.use(guardRouter(ctx, { versions }));
        return app;
      },
    });
  });
  afterAll(() => h2.close());

  test('a token exchange at POST /svc/v2/token checks htu and aud against the v2 URL', async () => {
    const v2 = { ...h2, urls: endpoints(h2.publicUrl, 2) };
    const { res } = await exchange(v2, { path: '/svc/v2/token' });
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
  });

  test('the deprecated v1 still exchanges with v1 URLs, and a v1 htu at v2 is 400 invalid_dpop_proof', async () => {
    expect((await exchange(h2, { path: '/svc/v1/token' })).res.status).toBe(200);
    const crossed = await exchange(h2, { path: '/svc/v2/token' });
    expect(crossed.res.status).toBe(400);
    expect(crossed.res.body.error).toBe('invalid_dpop_proof');
  });

  test.each([
    ['404 unknown major', 'get', '/svc/v7/nonce', 404],
    ['410 shut-down major', 'get', '/svc/v0/nonce', 410],
    ['405 wrong method', 'get', '/svc/v2/token', 405],
    ['405 wrong method', 'post', '/svc/v2/nonce', 405],
  ] as const)('%s (%s %s) carries x-rate-limit-* (A_26668-02)', async (_name, method, path, status) => {
    const res = await request(h2.app)[method](path);
    expect(res.status).toBe(status);
    expect(Number(res.headers['x-rate-limit-limit'])).toBeGreaterThan(0);
    expect(res.headers['x-rate-limit-remaining']).toMatch(/^\d+$/);
    expect(res.headers['x-rate-limit-reset']).toMatch(/^\d+$/);
  });
});
