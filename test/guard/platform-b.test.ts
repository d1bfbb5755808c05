import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SecurityLevel, VerifiedBootState } from '@peculiar/asn1-android';
import request from 'supertest';
import { generateEcKey, type EcKey } from '../../src/client/crypto';
import { attestationChallenge } from '../../src/common/attestation-challenge';
import { insertClient, type ClientRecord } from '../../src/guard/authserver/clients/client-store';
import { androidRoot, PACKAGE, SIGNER, type AndroidDevice, type AndroidIntermediate } from './helpers/android-attest';
import { exchange, fetchNonce, guardHarness, TOKEN_EXCHANGE, type Harness } from './helpers/harness';

/**
 * platform_b (Android key attestation): chains under a test root of our own, the
 * KeyDescription judged field by field, Google's status list served on loopback (REVOKED refuses,
 * SUSPENDED does not), the e-mail binding, and the attested key's signature at token exchange.
 */
describe('platform_b registration', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-b-'));
  let good: AndroidIntermediate;
  let revoked: AndroidIntermediate;
  let suspended: AndroidIntermediate;
  let statusList: http.Server;
  let h: Harness;

  beforeAll(async () => {
    const root = await androidRoot();
    good = await root.intermediate('0a1b2c');
    revoked = await root.intermediate('0bad01');
    suspended = await root.intermediate('51');
    fs.writeFileSync(path.join(dir, 'roots.pem'), root.rootPem);
    // Google keys the list by lower-case hex without leading zeros.
    const entries = { bad01: { status: 'REVOKED', reason: 'KEY_COMPROMISE' }, '51': { status: 'SUSPENDED', reason: 'SOFTWARE_FLAW' } };
    statusList = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ entries })));
    await new Promise<void>((resolve) => statusList.listen(0, '127.0.0.1', resolve));
    h = await guardHarness({
      env: {
        PLATFORM_B_TRUST_ANCHORS: path.join(dir, 'roots.pem'),
        PLATFORM_B_PACKAGES: `${PACKAGE}:${SIGNER.toString('hex').toUpperCase()}`,
        PLATFORM_B_REVOCATION_URL: `http://127.0.0.1:${(statusList.address() as AddressInfo).port}/attestation/status`,
      },
    });
  });
  afterAll(async () => {
    await h?.close();
    await new Promise<void>((resolve) => statusList.close(() => resolve()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const register = (clientKey: EcKey, device: AndroidDevice, extra: Record<string, unknown> = {}) =>
    request(h.app)
      .post('/svc/v1/register')
      .send({
        client_name: 'Patienten-App',
        token_endpoint_auth_method: 'private_key_jwt',
        grant_types: [TOKEN_EXCHANGE, 'refresh_token'],
        jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] },
        attestation_type: 'platform_b',
        platform_b_key_attestation_certificate_chain: device.chain,
        signed_hash_puk_client_sig: device.signedHashPukClientSig,
        platform_b_integrity_token: 'opaque-integrity-token',
        user_email: 'patient@example.org',
        ...extra,
      });
  const refusedWith = (res: request.Response, token: string) => {
    expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
    expect(res.body.error_description).toMatch(new RegExp(`^${token}: `));
  };
  const device = async (o: Partial<Parameters<AndroidIntermediate['device']>[0]> = {}, from = good) => {
    const clientKey = o.clientKey ?? (await generateEcKey());
    return { clientKey, device: await from.device({ clientKey, ...o }) };
  };

  test('a good chain: 202 and the e-mail code; verified, the attested key signs the token-time challenge', async () => {
    const { clientKey, device: d } = await device();
    const res = await register(clientKey, d);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'pending_verification', challenge_type: 'email_otp' });
    const row = await h.ctx.db.query<{ client: ClientRecord }>('SELECT client FROM guard_registration_transaction WHERE transaction_id = $1', [res.body.transaction_id]);
    const client = typeof row.rows[0].client === 'string' ? JSON.parse(row.rows[0].client as unknown as string) : row.rows[0].client;
    expect(client.attestation?.platform_b).toMatchObject({ package_name: PACKAGE, security_level: 'trusted_environment', integrity_token: 'opaque-integrity-token' });
    // Registered as /register/verify would (the e-mail step has its own tests).
    await insertClient(h.ctx, { ...client, issuedAt: new Date(client.issuedAt) });
    const nonce = await fetchNonce(h);
    const challenge = Buffer.from(attestationChallenge(clientKey.jkt, nonce), 'base64url');
    const posture = (signature: string) => (s: unknown) => ({ ...(s as object), platform: 'android', posture_type: 'platform_b', posture: { ...(s as { posture: object }).posture, platform_b_signature: signature } });
    const ok = await exchange(h, { client: { clientId: client.clientId, clientKey }, nonce, statement: posture(d.sign(challenge)) });
    expect(ok.res.status).toBe(200);
    expect(ok.res.body.svc_att_token).toEqual(expect.any(String));
    const other = await device();
    const nonce2 = await fetchNonce(h);
    const bad = await exchange(h, { client: { clientId: client.clientId, clientKey }, nonce: nonce2, statement: posture(other.device.sign(Buffer.from(attestationChallenge(clientKey.jkt, nonce2), 'base64url'))) });
    refusedWith(bad.res, 'assertion_signature');
  });

  test('without user_email: 400', async () => {
    const { clientKey, device: d } = await device();
    const res = await register(clientKey, d, { user_email: undefined });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
  });

  test('a chain under an unconfigured root', async () => {
    const stranger = await (await androidRoot('Other Root')).intermediate('77');
    const { clientKey, device: d } = await device({}, stranger);
    refusedWith(await register(clientKey, d), 'attestation_chain_untrusted');
  });

  test('a revoked intermediate is refused; a suspended one is not (Google semantics)', async () => {
    const r = await device({}, revoked);
    refusedWith(await register(r.clientKey, r.device), 'certificate_revoked');
    const s = await device({}, suspended);
    expect((await register(s.clientKey, s.device)).status).toBe(202);
  });

  test('a challenge over another client key', async () => {
    const { clientKey, device: d } = await device({ challengeKey: await generateEcKey() });
    refusedWith(await register(clientKey, d), 'attestation_challenge_mismatch');
  });

  test('software security level', async () => {
    const { clientKey, device: d } = await device({ securityLevel: SecurityLevel.software });
    refusedWith(await register(clientKey, d), 'security_level_too_low');
  });

  test('an unlocked device, and an unverified boot', async () => {
    const unlocked = await device({ deviceLocked: false });
    refusedWith(await register(unlocked.clientKey, unlocked.device), 'boot_state_not_verified');
    const unverified = await device({ bootState: VerifiedBootState.unverified });
    refusedWith(await register(unverified.clientKey, unverified.device), 'boot_state_not_verified');
  });

  test('another package, and the right package signed by another certificate', async () => {
    const pkg = await device({ packageName: 'com.example.other' });
    refusedWith(await register(pkg.clientKey, pkg.device), 'app_id_not_allowed');
    const signer = await device({ signerDigest: Buffer.alloc(32, 7) });
    refusedWith(await register(signer.clientKey, signer.device), 'app_id_not_allowed');
  });

  test('the status list unreachable with nothing cached: 503, nothing registered', async () => {
    const down = await guardHarness({
      db: h.ctx.db,
      env: { PLATFORM_B_TRUST_ANCHORS: path.join(dir, 'roots.pem'), PLATFORM_B_PACKAGES: `${PACKAGE}:${SIGNER.toString('hex')}`, PLATFORM_B_REVOCATION_URL: 'http://127.0.0.1:1/status' },
    });
    try {
      const { clientKey, device: d } = await device();
      const res = await request(down.app)
        .post('/svc/v1/register')
        .send({ client_name: 'A', token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE], jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] }, attestation_type: 'platform_b', platform_b_key_attestation_certificate_chain: d.chain, signed_hash_puk_client_sig: d.signedHashPukClientSig, user_email: 'a@example.org' });
      expect([res.status, res.body.error]).toEqual([503, 'temporarily_unavailable']);
      expect(res.body.error_description).toMatch(/^revocation_list_unavailable: /);
    } finally {
      await down.close();
    }
  });
});
