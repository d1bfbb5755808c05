import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { generateEcKey, type EcKey } from '../../src/client/crypto';
import { attestationChallenge } from '../../src/common/attestation-challenge';
import { appleCa, attestDevice, type AppleCa, type Device } from './helpers/app-attest';
import { exchange, fetchNonce, guardHarness, TOKEN_EXCHANGE, type Harness } from './helpers/harness';

/**
 * platform_a (Apple App Attest): devices attested under a test root of our own (the
 * real verification code, PLATFORM_A_TRUST_ANCHORS pointing at that root), registration for
 * desktop and phone App IDs, and assertions with a strictly increasing counter at token exchange.
 */
describe('platform_a registration and assertions', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-a-'));
  const DESKTOP = 'ABCDE12345.de.praxis.desktop';
  const PHONE = 'ABCDE12345.de.praxis.app';
  const DEV = 'ABCDE12345.de.praxis.beta';
  let ca: AppleCa;
  let h: Harness;

  beforeAll(async () => {
    ca = await appleCa();
    fs.writeFileSync(path.join(dir, 'roots.pem'), ca.rootPem);
    h = await guardHarness({
      env: { PLATFORM_A_TRUST_ANCHORS: path.join(dir, 'roots.pem'), PLATFORM_A_APP_IDS: `${DESKTOP}:desktop,${PHONE}:phone,${DEV}:phone:development` },
    });
  });
  afterAll(async () => {
    await h?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const register = (clientKey: EcKey, device: Device, extra: Record<string, unknown> = {}) =>
    request(h.app)
      .post('/svc/v1/register')
      .send({
        client_name: 'App',
        token_endpoint_auth_method: 'private_key_jwt',
        grant_types: [TOKEN_EXCHANGE, 'refresh_token'],
        jwks: { keys: [{ ...clientKey.publicJwk, use: 'sig' }] },
        attestation_type: 'platform_a',
        platform_a_attestation_object: device.attestationObject,
        signed_hash_puk_client_sig: device.signedHashPukClientSig,
        ...extra,
      });
  const refusedWith = (res: request.Response, token: string) => {
    expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
    expect(res.body.error_description).toMatch(new RegExp(`^${token}: `));
  };
  const assertionExchange = async (clientId: string, clientKey: EcKey, device: Device, counter?: number) => {
    const nonce = await fetchNonce(h);
    const challenge = Buffer.from(attestationChallenge(clientKey.jkt, nonce), 'base64url');
    const assertion = device.assert(challenge, counter);
    return exchange(h, {
      client: { clientId, clientKey },
      nonce,
      statement: (s) => ({ ...s, platform: 'apple', posture_type: 'platform_a', posture: { ...(s as { posture: Record<string, unknown> }).posture, platform_a_assertion: assertion } }),
    });
  };

  test('a desktop App ID: 201; token exchanges with rising counters get tokens and an svc_att_token; a repeated counter is refused', async () => {
    const clientKey = await generateEcKey();
    const device = await attestDevice(ca, { appId: DESKTOP, clientKey });
    const res = await register(clientKey, device);
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('pending_attestation');
    const first = await assertionExchange(res.body.client_id, clientKey, device);
    expect(first.res.status).toBe(200);
    expect(first.res.body.svc_att_token).toEqual(expect.any(String));
    const second = await assertionExchange(res.body.client_id, clientKey, device);
    expect(second.res.status).toBe(200);
    refusedWith((await assertionExchange(res.body.client_id, clientKey, device, device.counter)).res, 'counter_replayed');
    // A software posture instead of the assertion: refused (the client registered hardware).
    const software = await exchange(h, { client: { clientId: res.body.client_id, clientKey }, statement: (st) => ({ ...(st as object), platform: 'apple' }) });
    expect([software.res.status, software.res.body.error]).toEqual([400, 'invalid_request']);
    expect(software.res.body.error_description).toMatch(/posture_type must be platform_a/);
    // An assertion by another key with a fresh counter.
    const other = await attestDevice(ca, { appId: DESKTOP, clientKey });
    refusedWith((await assertionExchange(res.body.client_id, clientKey, other, 50)).res, 'assertion_signature');
  });

  test('a phone App ID: the e-mail code follows (202); without user_email 400', async () => {
    const clientKey = await generateEcKey();
    const device = await attestDevice(ca, { appId: PHONE, clientKey });
    const missing = await register(clientKey, device);
    expect([missing.status, missing.body.error]).toEqual([400, 'invalid_request']);
    const res = await register(clientKey, device, { user_email: 'patient@example.org' });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'pending_verification', challenge_type: 'email_otp' });
  });

  test('a chain under a root that is not configured', async () => {
    const clientKey = await generateEcKey();
    refusedWith(await register(clientKey, await attestDevice(await appleCa('Other Root'), { appId: DESKTOP, clientKey })), 'attestation_chain_untrusted');
  });

  test('a nonce over another client key', async () => {
    const clientKey = await generateEcKey();
    refusedWith(await register(clientKey, await attestDevice(ca, { appId: DESKTOP, clientKey, nonceKey: await generateEcKey() })), 'attestation_nonce_mismatch');
  });

  test('an App ID that is not configured', async () => {
    const clientKey = await generateEcKey();
    refusedWith(await register(clientKey, await attestDevice(ca, { appId: 'ZZZZZ99999.org.other.app', clientKey })), 'app_id_not_allowed');
  });

  test('a development key for a production-only App ID; accepted where the App ID admits development', async () => {
    const clientKey = await generateEcKey();
    refusedWith(await register(clientKey, await attestDevice(ca, { appId: DESKTOP, clientKey, development: true })), 'aaguid_not_allowed');
    const betaKey = await generateEcKey();
    const beta = await register(betaKey, await attestDevice(ca, { appId: DEV, clientKey: betaKey, development: true }), { user_email: 'beta@example.org' });
    expect(beta.status).toBe(202);
  });

  test('a counter other than 0 at attestation', async () => {
    const clientKey = await generateEcKey();
    refusedWith(await register(clientKey, await attestDevice(ca, { appId: DESKTOP, clientKey, counter: 3 })), 'counter_not_zero');
  });

  test('the client key self-signature missing its key, and a garbage attestation object', async () => {
    const clientKey = await generateEcKey();
    const device = await attestDevice(ca, { appId: DESKTOP, clientKey });
    const stranger = await generateEcKey();
    const canonical = Buffer.from(JSON.stringify({ crv: 'P-256', kty: 'EC', x: clientKey.publicJwk.x, y: clientKey.publicJwk.y }));
    refusedWith(await register(clientKey, device, { signed_hash_puk_client_sig: crypto.sign('sha256', canonical, stranger.privateKey).toString('base64url') }), 'client_key_binding');
    refusedWith(await register(clientKey, device, { platform_a_attestation_object: Buffer.from('not cbor at all').toString('base64') }), 'attestation_format');
  });
});
