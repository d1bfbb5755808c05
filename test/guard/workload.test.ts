import { execFile, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWK } from 'jose';
import request from 'supertest';
import { createDpopProof, generateEcKey, type EcKey } from '../../src/client/crypto';
import { issueWorkloadToken, SigningKeys, guardSettings } from '../../src/guard';
import { WorkloadIssuers } from '../../src/guard/authserver/workload/workload-issuers';
import type { AccessTokenPayload } from '../../src/guard/authserver/tokens/access-token';
import { callerOf } from '../../src/guard/pep/caller';
import { startServer } from '../../src/server';
import { createTestContext, migratedDataDir } from '../helpers/context';
import { call, pepHarness, type PepHarness } from './pep/helpers';
import type { TestToken } from './helpers/get-token';
import { entryArgs } from '../helpers/entry';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/**
 * A service exchanges a workload token from a trusted issuer for an access token of this guard
 * (docs/requirements.md#workload-token-exchange). The issuer here is a real HTTP server on loopback
 * serving its OpenID configuration and JWKS (keys rotate during the test); a second Terminus app is
 * the issuer of the last test.
 */
class Issuer {
  readonly keys: { kid: string; privateKey: crypto.KeyObject | Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; jwk: JWK }[] = [];
  jwksFetches = 0;
  /** The key `token()` signs with (an index into `keys`); -1: the newest. */
  signWith = -1;
  private server?: http.Server;
  url = '';

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: this.url, jwks_uri: `${this.url}/jwks` }));
      if (req.url === '/jwks') {
        this.jwksFetches++;
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys.map((k) => k.jwk) }));
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    await this.rotate();
    return this;
  }

  /** A new current key, published next to the old ones. */
  async rotate(alg: 'ES256' | 'RS256' = 'ES256'): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const kid = crypto.randomUUID();
    this.keys.push({ kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } });
    return kid;
  }

  /** A workload token; `key` an unpublished key to sign with instead. */
  async token(claims: Record<string, unknown> = {}, o: { kid?: string; key?: crypto.KeyObject | Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; alg?: string } = {}): Promise<string> {
    const current = this.keys.at(this.signWith)!;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: this.url, sub: 'system:serviceaccount:portal:sync', aud: 'https://terminus.example/svc/v1/token', iat: now, exp: now + 300, jti: crypto.randomUUID(), ...claims })
      .setProtectedHeader({ alg: o.alg ?? (current.jwk.alg as string), kid: o.kid ?? current.kid, typ: 'JWT' })
      .sign(o.key ?? current.privateKey);
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server!.close(() => resolve()));
  }
}

describe('workload token exchange', () => {
  const issuer = new Issuer();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workload-'));
  let h: PepHarness;
  let dpopKey: EcKey;

  beforeAll(async () => {
    await issuer.start();
    const file = path.join(dir, 'workload-issuers.json');
    fs.writeFileSync(
      file,
      JSON.stringify([{ issuer: issuer.url, subjects: ['system:serviceaccount:portal:*'], scopes: ['system/Slot.rs', 'system/Schedule.rs', 'system/Appointment.rs'], max_token_age: 600 }]),
    );
    // The policy blocks one subject the issuer's entry allows.
    const policy = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'policies', 'default.json'), 'utf8'));
    fs.writeFileSync(path.join(dir, 'policy.json'), JSON.stringify({ ...policy, blocked_users: ['system:serviceaccount:portal:blocked'] }));
    h = await pepHarness({ env: { WORKLOAD_ISSUERS_FILE: file, POLICY_FILE: path.join(dir, 'policy.json') }, fixture: true });
    dpopKey = await generateEcKey();
  });
  afterAll(async () => {
    await h?.close();
    await issuer.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const tokenUrl = 'https://terminus.example/svc/v1/token';
  const exchange = async (subjectToken: string, o: { proof?: string | null; form?: Record<string, string> } = {}) => {
    const proof = o.proof === undefined ? await createDpopProof(dpopKey, { method: 'POST', url: tokenUrl }) : o.proof;
    let r = request(h.app).post('/svc/v1/token').type('form');
    if (proof !== null) r = r.set('DPoP', proof);
    return r.send(new URLSearchParams({ grant_type: TOKEN_EXCHANGE, subject_token_type: JWT_TYPE, subject_token: subjectToken, ...o.form }).toString());
  };
  const denied = (res: request.Response, token: string) => {
    expect([res.status, res.body.error]).toEqual([403, 'access_denied']);
    expect(res.body.error_description).toMatch(new RegExp(`^${token}:`));
  };

  test('a valid workload token: a DPoP-bound access token that reads within its scopes and nothing more', async () => {
    const res = await exchange(await issuer.token());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'DPoP', scope: 'system/Slot.rs system/Schedule.rs system/Appointment.rs' });
    expect(res.body.refresh_token).toBeUndefined();
    const claims = JSON.parse(Buffer.from(res.body.access_token.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sub: 'system:serviceaccount:portal:sync', client_id: `${issuer.url}#system:serviceaccount:portal:sync`, cnf: { jkt: expect.any(String) } });
    const t = { accessToken: res.body.access_token, dpopKey } as TestToken;
    expect((await call(h, t, 'GET', '/Slot?_count=1')).status).toBe(200);
    const write = await call(h, t, 'POST', '/Patient', { body: { resourceType: 'Patient' } });
    expect([write.status, write.body.error]).toEqual([403, 'insufficient_scope']);
  });

  test("a workload's subject never passes for an institution or a repository owner", () => {
    const token = { sub: '1-2-DEV-PRAXIS-P256', client_id: `${issuer.url}#1-2-DEV-PRAXIS-P256`, scope: 'system/Slot.rs', profession_oid: '', platform: 'workload' } as AccessTokenPayload;
    expect(callerOf(token, ['1-2-DEV-PRAXIS-P256'])).toMatchObject({ institution: `${issuer.url}#1-2-DEV-PRAXIS-P256`, isOwner: false });
    expect(callerOf({ ...token, platform: 'linux' }, ['1-2-DEV-PRAXIS-P256'])).toMatchObject({ institution: '1-2-DEV-PRAXIS-P256', isOwner: true });
  });

  test('a narrower scope on request; a wider one is refused', async () => {
    const narrow = await exchange(await issuer.token(), { form: { scope: 'system/Slot.rs' } });
    expect([narrow.status, narrow.body.scope]).toEqual([200, 'system/Slot.rs']);
    const wide = await exchange(await issuer.token(), { form: { scope: 'system/Patient.cruds' } });
    expect([wide.status, wide.body.error]).toEqual([400, 'invalid_scope']);
  });

  test('a subject the issuer allows but the policy blocks: 403 policy_denied with the reasons', async () => {
    const res = await exchange(await issuer.token({ sub: 'system:serviceaccount:portal:blocked' }));
    denied(res, 'policy_denied');
    expect(res.body.reasons).toEqual(['User is on the blocklist']);
  });

  test('`terminus workload-token` prints a token of this guard for another guard', async () => {
    const dataDir = await migratedDataDir('workload-cli-');
    try {
      const out = spawnSync(process.execPath, [...entryArgs(path.join(__dirname, '..', '..', 'src', 'main.ts')), 'workload-token', '--sub', 'reporting', '--aud', 'https://b.example/svc/v1/token', '--ttl', '120'], {
        env: { PATH: process.env.PATH, DATA_DIR: dataDir, PUBLIC_URL: 'https://a.example', LOG_LEVEL: 'silent' },
        encoding: 'utf8',
      });
      expect([out.status, out.stderr]).toEqual([0, '']);
      const [header, payload] = out.stdout.trim().split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
      expect(header).toMatchObject({ alg: 'ES256', typ: 'JWT', kid: expect.any(String) });
      expect(payload).toMatchObject({ iss: 'https://a.example', sub: 'reporting', aud: 'https://b.example/svc/v1/token', jti: expect.any(String) });
      expect(payload.exp - payload.iat).toBe(120);
      const bad = spawnSync(process.execPath, [...entryArgs(path.join(__dirname, '..', '..', 'src', 'main.ts')), 'workload-token', '--sub', 'reporting'], { env: { PATH: process.env.PATH, DATA_DIR: dataDir }, encoding: 'utf8' });
      expect(bad.status).toBe(2);
      expect(bad.stderr).toMatch(/--aud/);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('an issuer not in WORKLOAD_ISSUERS_FILE', async () => {
    denied(await exchange(await issuer.token({ iss: 'https://other.example' })), 'untrusted_issuer');
  });

  test('a key the issuer does not publish', async () => {
    const { privateKey } = await generateKeyPair('ES256');
    denied(await exchange(await issuer.token({}, { key: privateKey })), 'invalid_signature');
    denied(await exchange(await issuer.token({}, { key: privateKey, kid: 'unknown-kid' })), 'invalid_signature');
  });

  test('a rotated key: an unknown kid within the minute is refused without asking the issuer; after the cooldown the key set is refetched', async () => {
    expect((await exchange(await issuer.token())).status).toBe(200);
    const fetches = issuer.jwksFetches;
    const quick = new WorkloadIssuers(h.ctx.config.workloadIssuers, () => new Date(), 200);
    const before = await issuer.token();
    await jwtVerify(before, await quick.keysOf(quick.find(issuer.url)!), { audience: 'https://terminus.example/svc/v1/token' });
    await issuer.rotate('RS256');
    try {
      const rotated = await issuer.token();
      const early = await exchange(rotated);
      // The guard fetched the key set at most a minute ago: it does not ask again for this kid.
      expect(issuer.jwksFetches).toBe(fetches + 1);
      denied(early, 'invalid_signature');
      // With a short cooldown (the same class) the new key is fetched and the token verifies.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await jwtVerify(await issuer.token(), await quick.keysOf(quick.find(issuer.url)!), { audience: 'https://terminus.example/svc/v1/token' });
      expect(issuer.jwksFetches).toBe(fetches + 2);
    } finally {
      // The other tests sign with the first key again (the app learns the new one only after a minute).
      issuer.signWith = 0;
    }
  });

  test('another audience, expired, too old, not yet valid', async () => {
    const now = Math.floor(h.ctx.now().getTime() / 1000);
    denied(await exchange(await issuer.token({ aud: 'https://elsewhere.example/token', iat: now, exp: now + 300 })), 'invalid_audience');
    denied(await exchange(await issuer.token({ iat: now - 400, exp: now - 120 })), 'expired');
    denied(await exchange(await issuer.token({ iat: now - 700, exp: now + 300 })), 'expired');
    denied(await exchange(await issuer.token({ iat: now, nbf: now + 600, exp: now + 900 })), 'expired');
  });

  test('the same token twice: replayed', async () => {
    const now = Math.floor(h.ctx.now().getTime() / 1000);
    const token = await issuer.token({ iat: now, exp: now + 300 });
    expect((await exchange(token)).status).toBe(200);
    denied(await exchange(token), 'replayed');
  });

  test('a subject the issuer may not use', async () => {
    const now = Math.floor(h.ctx.now().getTime() / 1000);
    denied(await exchange(await issuer.token({ sub: 'system:serviceaccount:billing:export', iat: now, exp: now + 300 })), 'subject_not_allowed');
  });

  test('bad parameters: 400 invalid_request; no DPoP proof: 400 invalid_dpop_proof', async () => {
    const now = Math.floor(h.ctx.now().getTime() / 1000);
    const token = await issuer.token({ iat: now, exp: now + 300 });
    const wrongType = await exchange(token, { form: { subject_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' } });
    expect([wrongType.status, wrongType.body.error]).toEqual([400, 'invalid_request']);
    const notJwt = await exchange('not-a-jwt');
    expect([notJwt.status, notJwt.body.error]).toEqual([400, 'invalid_request']);
    const noJti = await exchange(await issuer.token({ jti: undefined, iat: now, exp: now + 300 }));
    expect([noJti.status, noJti.body.error]).toEqual([400, 'invalid_request']);
    const requested = await exchange(token, { form: { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' } });
    expect([requested.status, requested.body.error]).toEqual([400, 'invalid_request']);
    const noProof = await exchange(token, { proof: null });
    expect([noProof.status, noProof.body.error]).toEqual([400, 'invalid_dpop_proof']);
  });

  test('this guard as the issuer: its openid-configuration, and its token exchanged at another guard', async () => {
    const config = await request(h.app).get('/.well-known/openid-configuration');
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({ issuer: 'https://terminus.example', jwks_uri: 'https://terminus.example/svc/v1/jwks', id_token_signing_alg_values_supported: ['ES256'] });

    // Guard A on loopback issues; guard B (h) trusts it through WORKLOAD_ISSUERS_FILE.
    const a = await pepHarness({ env: { PUBLIC_URL: 'http://127.0.0.1:1' } });
    const server = http.createServer(a.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const b = await (async () => {
      const file = path.join(dir, 'issuer-a.json');
      // A's PUBLIC_URL must be the address B fetches from: a second app of A on that origin.
      const aOrigin = `http://127.0.0.1:${port}`;
      const a2 = await pepHarness({ env: { PUBLIC_URL: aOrigin }, db: a.ctx.db });
      server.removeAllListeners('request');
      server.on('request', a2.app);
      fs.writeFileSync(file, JSON.stringify([{ issuer: aOrigin, subjects: ['reporting'], scopes: ['system/Slot.rs'] }]));
      return { a2, target: await pepHarness({ env: { WORKLOAD_ISSUERS_FILE: file } }) };
    })();
    try {
      const token = await issueWorkloadToken(new SigningKeys(b.a2.ctx, guardSettings(b.a2.ctx.config)), guardSettings(b.a2.ctx.config), new Date(), { sub: 'reporting', aud: ['https://terminus.example/svc/v1/token'], ttlSec: 300 });
      const proof = await createDpopProof(dpopKey, { method: 'POST', url: tokenUrl });
      const res = await request(b.target.app)
        .post('/svc/v1/token')
        .type('form')
        .set('DPoP', proof)
        .send(new URLSearchParams({ grant_type: TOKEN_EXCHANGE, subject_token_type: JWT_TYPE, subject_token: token }).toString());
      expect([res.status, res.body.scope]).toEqual([200, 'system/Slot.rs']);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await b.target.close();
      await b.a2.close();
      await a.close();
    }
  });
});

describe('this guard as the workload issuer: the key its tokens are signed with', () => {
  const request_ = { sub: 'reporting', aud: ['https://b.example/svc/v1/token'], ttlSec: 300 };
  const kids = (keys: JWK[]) => keys.map((k) => k.kid);

  test("a key one replica or process adds is at every replica's jwks_uri at once; minting again reuses it", async () => {
    const env = { GUARD_KEY_SECRET: 'workload-issuer-test-secret-0123456789' };
    const a = await pepHarness({ env });
    const b = await pepHarness({ env, db: a.ctx.db });
    try {
      const before = (await request(b.app).get('/svc/v1/jwks')).body.keys as JWK[];
      expect(before).toHaveLength(1);
      // Past the rotation on A (30 days): the next token A signs is signed with a new key.
      a.ctx.clock.advance(30 * 86_400_000 + 60_000);
      const settings = guardSettings(a.ctx.config);
      // Each call as the command makes it: a process of its own (a new SigningKeys) with the secret.
      const tokens = [];
      for (let i = 0; i < 3; i++) tokens.push(await issueWorkloadToken(new SigningKeys(a.ctx, settings), settings, a.ctx.now(), request_));
      const kid = decodeProtectedHeader(tokens[0]).kid!;
      expect(tokens.map((t) => decodeProtectedHeader(t).kid)).toEqual([kid, kid, kid]);
      expect(kids(before)).not.toContain(kid);
      // B read its key set a moment ago and its clock did not move: it publishes the new key anyway.
      const after = (await request(b.app).get('/svc/v1/jwks')).body.keys as JWK[];
      expect(kids(after)).toEqual([kid, ...kids(before)]);
      for (const token of tokens) await jwtVerify(token, createLocalJWKSet({ keys: after }), { audience: request_.aud[0], currentDate: a.ctx.now() });
    } finally {
      await b.close();
      await a.close();
    }
  });

  (process.env.DATABASE_URL ? test : test.skip)('PostgreSQL without GUARD_KEY_SECRET: `terminus workload-token` asks the server of its DATA_DIR, the only process that can open its keys', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'workload-pg-'));
    const ctx = await createTestContext({ env: { DATA_DIR: dataDir, PUBLIC_URL: 'https://a.example' } });
    const server = await startServer({ ...ctx.config, port: 0, host: '127.0.0.1' }, ctx, { workloadSocket: true });
    try {
      const jwks = async () => (await request(server.http).get('/svc/v1/jwks')).body.keys as JWK[];
      const before = await jwks();
      const r = await promisify(execFile)(
        process.execPath,
        [...entryArgs(path.join(__dirname, '..', '..', 'src', 'main.ts')), 'workload-token', '--sub', 'reporting', '--aud', request_.aud[0]],
        { env: { PATH: process.env.PATH, DATA_DIR: dataDir, DATABASE_URL: process.env.DATABASE_URL, LOG_LEVEL: 'silent' }, timeout: 90_000 },
      );
      expect(r.stderr).toBe('');
      expect(await jwks()).toEqual(before);
      await jwtVerify(r.stdout.trim(), createLocalJWKSet({ keys: before }), { issuer: 'https://a.example', audience: request_.aud[0] });
    } finally {
      await server.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
