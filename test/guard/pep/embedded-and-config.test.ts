import express from 'express';
import request from 'supertest';
import { ConfigError, loadConfig } from '../../../src/config';
import { composeParts } from '../../../src/app';
import { fhirBodyText, fhirReachPort } from '../../../src/fhir';
import { enforcementPoint } from '../../../src/guard/pep';
import { encodeWithin } from '../../../src/guard/pep/forwarded-headers';
import { createTestContext } from '../../helpers/context';
import { call, institution, pepHarness, type PepHarness } from './helpers';

const decode = (v: unknown) => JSON.parse(Buffer.from(String(v), 'base64url').toString('utf8')) as Record<string, string>;

/** The enforcement point in front of an embedded application: what the application receives. */
describe('embedded mode: what the protected application sees', () => {
  let h: PepHarness;
  let echo: express.Express;
  beforeAll(async () => {
    h = await pepHarness();
    echo = express();
    echo.use('/fhir', enforcementPoint(h.ctx, { fhir: fhirReachPort(h.fhir), readBody: fhirBodyText() }), (req, res) => {
      res.json({ headers: req.headers, identity: res.locals.caller, clientHash: res.locals.clientHash });
    });
  });
  afterAll(() => h.close());

  test('identity headers and the typed identity replace whatever the client sent', async () => {
    const t = await institution(h, { telematikId: '1-PEP-EMBED', professionOid: '1.2.276.0.76.4.52' });
    const res = await call({ ...h, app: echo }, t, 'GET', '/Slot', { headers: { 'svc-user-info': 'FAKE', 'svc-client-data': 'FAKE', 'svc-popp-token-content': 'FAKE' } });
    expect(res.status).toBe(200);
    expect(decode(res.body.headers['svc-user-info'])).toEqual({ identifier: '1-PEP-EMBED', professionOID: '1.2.276.0.76.4.52', commonName: 'Praxis 1-PEP-EMBED', organizationName: 'Praxis 1-PEP-EMBED' });
    expect(decode(res.body.headers['svc-client-data']).client_id).toBe(t.clientId);
    expect(res.body.headers['svc-popp-token-content']).toBeUndefined();
    expect(res.body.identity).toEqual({ institution: '1-PEP-EMBED', professionOid: '1.2.276.0.76.4.52', clientId: t.clientId, scopes: t.scope.split(' '), isOwner: false });
    expect(res.body.clientHash).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });

  test('with GUARD_ENFORCEMENT=off nothing is checked, but client-sent identity headers are still dropped', async () => {
    const ctx = await createTestContext({ env: { GUARD_ENFORCEMENT: 'off' } });
    try {
      const app = express();
      app.use('/fhir', enforcementPoint(ctx, { fhir: fhirReachPort(composeParts(ctx).fhir), readBody: fhirBodyText() }), (req, res) => res.json({ headers: req.headers, identity: res.locals.caller ?? null }));
      const res = await request(app).get('/fhir/Slot').set('svc-user-info', 'FAKE');
      expect(res.status).toBe(200);
      expect(res.body.headers['svc-user-info']).toBeUndefined();
      expect(res.body.identity).toBeNull();
    } finally {
      await ctx.db.close();
    }
  });
});

describe('forwarded header sizes', () => {
  test('optional members go first, then the longest shortenable value is cut; identifiers never', () => {
    const long = 'Ä'.repeat(100);
    const v = encodeWithin(250, [
      { name: 'identifier', value: '1-20014711' },
      { name: 'professionOID', value: '1.2.276.0.76.4.50' },
      { name: 'commonName', value: long, shortenable: true },
      { name: 'organizationName', value: long, optional: true, shortenable: true },
    ]);
    expect(v.length).toBeLessThanOrEqual(250);
    const o = decode(v);
    expect(o.identifier).toBe('1-20014711');
    expect(o.professionOID).toBe('1.2.276.0.76.4.50');
    expect(o.organizationName).toBeUndefined();
    expect(long.startsWith(o.commonName)).toBe(true);
  });
});

describe('configuration of the enforcement point', () => {
  test('defaults: enforcement on, 6000 FHIR requests per minute per client, no PoPP', () => {
    const c = loadConfig({});
    expect([c.guardEnforcement, c.rateLimitFhirPerClient, c.poppJwksUrl, c.poppRequiredRoutes]).toEqual([true, 6000, undefined, []]);
  });

  test('PoPP routes are parsed', () => {
    const c = loadConfig({ POPP_JWKS_URL: 'https://popp.example/jwks', POPP_REQUIRED_ROUTES: 'Patient, Appointment/$book,$export,*' });
    expect(c.poppRequiredRoutes).toEqual(['Patient', 'Appointment/$book', '$export', '*']);
  });

  test.each([
    [{ GUARD_ENFORCEMENT: 'off', NODE_ENV: 'production' }, 'GUARD_ENFORCEMENT'],
    [{ GUARD_ENFORCEMENT: 'maybe' }, 'GUARD_ENFORCEMENT'],
    [{ POPP_REQUIRED_ROUTES: 'Patient' }, 'POPP_REQUIRED_ROUTES'],
    [{ POPP_JWKS_URL: 'https://popp.example/jwks', POPP_REQUIRED_ROUTES: 'patient/../x' }, 'POPP_REQUIRED_ROUTES'],
    [{ POPP_JWKS_URL: 'not a url' }, 'POPP_JWKS_URL'],
    [{ RATE_LIMIT_FHIR_PER_CLIENT: '0' }, 'RATE_LIMIT_FHIR_PER_CLIENT'],
    [{ UPSTREAM_URL: 'ftp://x' }, 'UPSTREAM_URL'],
  ])('%j stops the start naming %s', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      expect((err as ConfigError).variable).toBe(variable);
    }
  });
});
