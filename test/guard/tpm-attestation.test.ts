import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import { calculateJwkThumbprint, createLocalJWKSet, jwtVerify, type JWK } from 'jose';
import path from 'node:path';
import request from 'supertest';
import { TpmTools } from '../../src/attestation-helper/tpm-tools';
import { generateEcKey, type EcKey } from '../../src/client/crypto';
import { freePort, startSoftwareTpm, type SoftwareTpm } from '../helpers/swtpm';
import { parseTpm2bPublic, tpmPublicKey } from '../../src/guard/attestation/tpm/tpm-public';
import { canonicalJwk, TestTpmClient } from '../helpers/tpm-client';
import { decodePayload, exchange, fetchNonce, guardHarness, nowSec, type Harness } from './helpers/harness';

/**
 * TPM registration with credential activation and the TPM posture at token exchange
 * (docs/requirements.md#hardware-attestation), against a real swtpm driven by tpm2-tools: RSA and
 * P-384 EKs.
 */
let tpm: SoftwareTpm;
let foreign: SoftwareTpm;
let h: Harness;
let rsa: TestTpmClient;
let ecc: TestTpmClient;
let policyFile: string;
let server: http.Server;

beforeAll(async () => {
  [tpm, foreign] = await Promise.all([startSoftwareTpm(), startSoftwareTpm()]);
  const anchors = path.join(tpm.dir, 'ek-anchors.pem');
  await fs.writeFile(anchors, tpm.ekCaPem);
  policyFile = path.join(tpm.dir, 'policy.json');
  await fs.writeFile(policyFile, await fs.readFile('policies/default.json'));
  // A real listener: another guard instance fetches this one's metadata and keys (svc_att_token).
  const port = await freePort();
  h = await guardHarness({ env: { PUBLIC_URL: `http://127.0.0.1:${port}`, TPM_EK_TRUST_ANCHORS: anchors, REGISTRATION_TTL_SECONDS: '60', POLICY_FILE: policyFile } });
  server = http.createServer(h.app);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  rsa = new TestTpmClient(new TpmTools(tpm.tcti, 'rsa'));
  ecc = new TestTpmClient(new TpmTools(tpm.tcti, 'ecc384', 0x81010003));
  await rsa.bootStory();
}, 120_000);
afterAll(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  await h?.close();
  await Promise.all([tpm?.close(), foreign?.close()]);
});

const register = (body: unknown) => request(h.app).post('/svc/v1/register').send(body as object);
const verify = (body: unknown) => request(h.app).post('/svc/v1/register/verify').send(body as object);

async function registerTpmClient(client: TestTpmClient, o: { ekAsJwk?: boolean } = {}): Promise<{ clientId: string; clientKey: EcKey }> {
  const clientKey = await generateEcKey();
  const pending = await register(await client.registrationBody(clientKey, o));
  expect(pending.status).toBe(202);
  const done = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: await client.activate(pending.body) });
  expect(done.status).toBe(201);
  return { clientId: done.body.client_id, clientKey };
}

describe('registration (attestation_type tpm)', () => {
  test('RSA EK: 202 with the credential, the TPM activates it, verify registers the client (201, pending_attestation)', async () => {
    const clientKey = await generateEcKey();
    const pending = await register(await rsa.registrationBody(clientKey));
    expect(pending.status).toBe(202);
    expect(pending.headers['cache-control']).toBe('no-store');
    expect(pending.body).toMatchObject({ status: 'pending_verification', expires_in: 60, challenge_type: 'tpm_activation' });
    expect(pending.body.transaction_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // TPM2B_ID_OBJECT (2 + 68) and TPM2B_ENCRYPTED_SECRET (2 + 256) with their size prefixes.
    expect(Buffer.from(pending.body.tpm_credential_blob, 'base64')).toHaveLength(70);
    expect(Buffer.from(pending.body.tpm_encrypted_secret, 'base64')).toHaveLength(258);
    const before = await h.ctx.db.query('SELECT 1 FROM guard_client WHERE jkt = $1', [clientKey.jkt]);
    expect(before.rows).toHaveLength(0);
    const secret = await rsa.activate(pending.body);
    const done = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: secret });
    expect(done.status).toBe(201);
    expect(done.headers['cache-control']).toBe('no-store');
    expect(done.body).toMatchObject({ status: 'pending_attestation', token_endpoint_auth_method: 'private_key_jwt' });
    expect(done.body.jwks.keys[0]).toMatchObject({ x: clientKey.publicJwk.x, y: clientKey.publicJwk.y });
    // Single use: the same answer again finds nothing.
    const replay = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: secret });
    expect(replay.status).toBe(404);
    expect(replay.body.error).toBe('resource_not_found');
  });

  test('P-384 EK (SHA-384, AES-256): ECDH + KDFe credential activated by the TPM', async () => {
    const clientKey = await generateEcKey();
    const pending = await register(await ecc.registrationBody(clientKey));
    expect(pending.status).toBe(202);
    expect(Buffer.from(pending.body.tpm_credential_blob, 'base64')).toHaveLength(86);
    expect(Buffer.from(pending.body.tpm_encrypted_secret, 'base64')).toHaveLength(102);
    const done = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: await ecc.activate(pending.body) });
    expect(done.status).toBe(201);
  });

  test.each([['RSA', () => rsa], ['P-384', () => ecc]])('EK given as JWK (%s, default template assumed)', async (_name, client) => {
    await registerTpmClient(client(), { ekAsJwk: true });
  });

  test('wrong secret: 400 twice, the third wrong answer ends the transaction (then 404 even for the right one)', async () => {
    const pending = await register(await rsa.registrationBody(await generateEcKey()));
    expect(pending.status).toBe(202);
    const right = await rsa.activate(pending.body);
    const wrong = Buffer.alloc(32, 7).toString('base64');
    for (let i = 0; i < 3; i++) {
      const r = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: wrong });
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('invalid_request');
      expect(r.body.error_description).toMatch(/^invalid_activation_secret/);
    }
    const late = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: right });
    expect(late.status).toBe(404);
  });

  test('one wrong answer, then the right one: 201', async () => {
    const pending = await register(await rsa.registrationBody(await generateEcKey()));
    const wrong = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: Buffer.alloc(32).toString('base64') });
    expect(wrong.status).toBe(400);
    const done = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: await rsa.activate(pending.body) });
    expect(done.status).toBe(201);
  });

  test('expired transaction: 404', async () => {
    const pending = await register(await rsa.registrationBody(await generateEcKey()));
    const secret = await rsa.activate(pending.body);
    h.ctx.clock.advance(61_000);
    try {
      const r = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: secret });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('resource_not_found');
    } finally {
      h.ctx.clock.advance(-61_000);
    }
  });

  test('unknown transaction: 404; malformed verify requests: 400', async () => {
    expect((await verify({ transaction_id: crypto.randomUUID(), verify_type: 'tpm_activation', tpm_decrypted_secret: 'AAAA' })).status).toBe(404);
    expect((await verify({ transaction_id: 'not-a-uuid', verify_type: 'tpm_activation', tpm_decrypted_secret: 'AAAA' })).status).toBe(404);
    expect((await verify({ verify_type: 'tpm_activation', tpm_decrypted_secret: 'AAAA' })).status).toBe(400);
    const pending = await register(await rsa.registrationBody(await generateEcKey()));
    const other = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'email_code', tpm_decrypted_secret: 'AAAA' });
    expect(other.status).toBe(400);
    const junk = await verify({ transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: '%%%' });
    expect(junk.status).toBe(400);
  });

  test('two verifies racing on one transaction: exactly one 201', async () => {
    const pending = await register(await rsa.registrationBody(await generateEcKey()));
    const secret = await rsa.activate(pending.body);
    const body = { transaction_id: pending.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: secret };
    const answers = await Promise.all([verify(body), verify(body), verify(body)]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 404, 404]);
  });

  test('a registered client key: 409 at registration, and again at verify when it was registered meanwhile', async () => {
    const { clientKey } = await registerTpmClient(rsa);
    const again = await register(await rsa.registrationBody(clientKey));
    expect(again.status).toBe(409);
    expect(again.body.error).toBe('conflict');
    const key = await generateEcKey();
    const p1 = await register(await rsa.registrationBody(key));
    const p2 = await register(await rsa.registrationBody(key));
    expect([p1.status, p2.status]).toEqual([202, 202]);
    const v1 = await verify({ transaction_id: p1.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: await rsa.activate(p1.body) });
    expect(v1.status).toBe(201);
    const v2 = await verify({ transaction_id: p2.body.transaction_id, verify_type: 'tpm_activation', tpm_decrypted_secret: await rsa.activate(p2.body) });
    expect(v2.status).toBe(409);
  });

  const refused = async (body: Record<string, unknown>, token: string) => {
    const r = await register(body);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('invalid_request');
    expect(r.body.error_description).toMatch(new RegExp(`^${token}`));
  };

  test('EK certificate from a foreign manufacturer CA: ek_chain_untrusted', async () => {
    const other = new TestTpmClient(new TpmTools(foreign.tcti, 'rsa'));
    await refused(await other.registrationBody(await generateEcKey()), 'ek_chain_untrusted');
  });

  test('EK certificate whose key is not puk_ek_enc: ek_cert_mismatch', async () => {
    const body = await rsa.registrationBody(await generateEcKey());
    body.c_ek_enc = (await ecc.tools.ekCertificate()).toString('base64');
    await refused(body, 'ek_cert_mismatch');
  });

  test('AK without restricted: ak_attributes', async () => {
    const body = await rsa.registrationBody(await generateEcKey());
    const ak = Buffer.from(body.puk_ak_sig as string, 'base64');
    ak[2 + 4 + 1] &= ~0x01; // TPMA_OBJECT restricted (bit 16): third byte of the big-endian u32
    body.puk_ak_sig = ak.toString('base64');
    await refused(body, 'ak_attributes');
  });

  test('EK that can sign (the AK sent as EK): ek_attributes', async () => {
    const body = await rsa.registrationBody(await generateEcKey());
    body.puk_ek_enc = body.puk_ak_sig;
    await refused(body, 'ek_attributes');
  });

  test('binding signature over another key: client_key_binding', async () => {
    const key = await generateEcKey();
    const body = await rsa.registrationBody(key);
    body.signed_hash_puk_client_sig = (await rsa.tools.akSign(canonicalJwk(await generateEcKey()))).toString('base64url');
    await refused(body, 'client_key_binding');
  });

  test('TPM structures with trailing bytes or truncated: malformed_tpm_structure', async () => {
    const body = await rsa.registrationBody(await generateEcKey());
    await refused({ ...body, puk_ak_sig: Buffer.concat([Buffer.from(body.puk_ak_sig as string, 'base64'), Buffer.from([0])]).toString('base64') }, 'malformed_tpm_structure');
    await refused({ ...body, puk_ek_enc: Buffer.from(body.puk_ek_enc as string, 'base64').subarray(0, 40).toString('base64') }, 'malformed_tpm_structure');
  });

  test('missing TPM members and a software registration with TPM members: 400', async () => {
    const body = await rsa.registrationBody(await generateEcKey());
    for (const m of ['puk_ek_enc', 'c_ek_enc', 'puk_ak_sig', 'signed_hash_puk_client_sig']) {
      const r = await register({ ...body, [m]: undefined });
      expect(r.status).toBe(400);
    }
    expect((await register({ ...body, attestation_type: 'software' })).status).toBe(400);
  });
});

test('hostile registration and verify bodies: 400 or 404 with an error code, never a 500', async () => {
  const body = await rsa.registrationBody(await generateEcKey());
  const ak = Buffer.from(body.puk_ak_sig as string, 'base64');
  const variants: unknown[] = [
    { ...body, puk_ek_enc: { kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' } },
    { ...body, puk_ek_enc: { kty: 'RSA', n: 'AQAB', e: 'AQAB' } },
    { ...body, puk_ek_enc: { kty: 'RSA', n: Buffer.alloc(256, 1).toString('base64url'), e: 'AAAAAAAA' } },
    { ...body, puk_ek_enc: { kty: 'oct' } },
    { ...body, puk_ek_enc: 42 },
    { ...body, puk_ek_enc: '' },
    { ...body, puk_ak_sig: Buffer.from([0, 0]).toString('base64') },
    { ...body, puk_ak_sig: Buffer.concat([Buffer.from([0xff, 0xff]), ak.subarray(2)]).toString('base64') },
    { ...body, c_ek_enc: Buffer.from('not a certificate').toString('base64') },
    { ...body, c_ek_enc: '%%%' },
    { ...body, tpm_ek_certificate_chain: 'x' },
    { ...body, tpm_ek_certificate_chain: [Buffer.from('junk').toString('base64')] },
    { ...body, signed_hash_puk_client_sig: 'AAAA' },
    { ...body, signed_hash_puk_client_sig: 'A'.repeat(20_000) },
    { ...body, puk_client_sig: { kty: 'EC' } },
  ];
  for (const v of variants) {
    const r = await register(v);
    expect([400, 409]).toContain(r.status);
    expect(r.body.error).toEqual(expect.any(String));
  }
  for (const v of [[], null, 'x', { transaction_id: 5 }, { transaction_id: crypto.randomUUID(), verify_type: 5 }, { transaction_id: crypto.randomUUID(), verify_type: 'tpm_activation', tpm_decrypted_secret: 'A'.repeat(5000) }]) {
    const r = await verify(v);
    expect([400, 404]).toContain(r.status);
    expect(r.body.error).toEqual(expect.any(String));
  }
  const raw = await request(h.app).post('/svc/v1/register/verify').set('content-type', 'application/json').send('{"transaction_id":');
  expect(raw.status).toBe(400);
});

describe('token exchange with a TPM posture', () => {
  const tpmStatement = (posture: Record<string, unknown>) => (s: Record<string, unknown>) => ({ ...s, posture_type: 'tpm', posture });

  async function tpmExchange(o: { posture?: (p: Record<string, unknown>) => Record<string, unknown>; pcrs?: number[]; qualifyingData?: Buffer; client?: { clientId: string; clientKey: EcKey } } = {}) {
    const client = o.client ?? (await registerTpmClient(rsa));
    const nonce = await fetchNonce(h);
    const posture = await rsa.posture(client.clientKey.jkt, nonce, { pcrs: o.pcrs, qualifyingData: o.qualifyingData });
    return exchange(h, { client, nonce, statement: tpmStatement(o.posture ? o.posture(posture) : posture) });
  }

  test('happy path: tokens, the policy sees the replayed PCRs, the client becomes active', async () => {
    const client = await registerTpmClient(rsa);
    const { res } = await tpmExchange({ client });
    expect(res.status).toBe(200);
    expect(res.body.access_token).toBeTruthy();
    const row = await h.ctx.db.query<{ status: string; policy_input: { client_registration_data: { attestation_result: { tpm: { pcrs: Record<string, string>; quote_verified: boolean } } } } }>(
      `SELECT c.status, s.policy_input FROM guard_client c JOIN guard_session s ON s.client_id = c.client_id WHERE c.client_id = $1`,
      [client.clientId],
    );
    expect(row.rows[0].status).toBe('active');
    const tpmResult = row.rows[0].policy_input.client_registration_data.attestation_result.tpm;
    expect(tpmResult.quote_verified).toBe(true);
    const live = await rsa.tools.pcrRead([7, 23]);
    expect(tpmResult.pcrs).toEqual({ '7': live.get(7)!.toString('hex'), '23': live.get(23)!.toString('hex') });
  });

  test('stale nonce: the quote carries another challenge (400)', async () => {
    const { res } = await tpmExchange({ qualifyingData: Buffer.alloc(32, 1) });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
    expect(res.body.error_description).toMatch(/attestation challenge/);
  });

  test('PCR set {7} only (400)', async () => {
    const { res } = await tpmExchange({ pcrs: [7] });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/exactly the sha256 PCRs/);
  });

  test('tampered event log (400)', async () => {
    const { res } = await tpmExchange({
      posture: (p) => {
        const log = Buffer.from(p.tpm_event_log as string, 'base64');
        log[log.length - 1] ^= 0xff; // event data is not replayed...
        log[log.length - 30] ^= 0xff; // ...but the digest before it is
        return { ...p, tpm_event_log: log.toString('base64') };
      },
    });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/does not replay|tpm_event_log/);
  });

  test('quote by another AK (400)', async () => {
    const nonce = await fetchNonce(h);
    const client = await registerTpmClient(rsa);
    const other = await ecc.posture(client.clientKey.jkt, nonce);
    const mine = await rsa.posture(client.clientKey.jkt, nonce);
    const { res } = await exchange(h, { client, nonce, statement: tpmStatement({ ...mine, tpm_quote: other.tpm_quote }) });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/scheme of the registered AK|does not verify/);
  });

  test('posture naming another AK than the registered one (400)', async () => {
    const nonce = await fetchNonce(h);
    const client = await registerTpmClient(rsa);
    const other = await ecc.posture(client.clientKey.jkt, nonce);
    const { res } = await exchange(h, { client, nonce, statement: tpmStatement(other) });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/tpm_attestation_key/);
  });

  test('trailing bytes after the signature (400)', async () => {
    const { res } = await tpmExchange({ posture: (p) => ({ ...p, tpm_quote: Buffer.concat([Buffer.from(p.tpm_quote as string, 'base64'), Buffer.from([0])]).toString('base64') }) });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/trailing bytes/);
  });

  test('junk quote (ZETA UC06) and a software client claiming a TPM posture (400)', async () => {
    const junk = await tpmExchange({ posture: (p) => ({ ...p, tpm_quote: Buffer.from('junk').toString('base64') }) });
    expect(junk.res.status).toBe(400);
    const nonce = await fetchNonce(h);
    const posture = await rsa.posture('AAAA', nonce);
    const { res } = await exchange(h, { nonce, statement: tpmStatement(posture) });
    expect(res.status).toBe(400);
    expect(res.body.error_description).toMatch(/registered with attestation_type tpm/);
  });

  test('PCR 23 extended with an unknown measurement against a baseline: 403 access_denied with reasons', async () => {
    const live = await rsa.tools.pcrRead([7, 23]);
    const policy = JSON.parse(await fs.readFile('policies/default.json', 'utf8'));
    policy.tpm = { pcr_baselines: [{ '7': live.get(7)!.toString('hex'), '23': live.get(23)!.toString('hex') }] };
    await fs.writeFile(policyFile, JSON.stringify(policy));
    const baselined = await guardHarness({ db: h.ctx.db, env: { TPM_EK_TRUST_ANCHORS: path.join(tpm.dir, 'ek-anchors.pem'), POLICY_FILE: policyFile } });
    try {
      const client = await registerTpmClient(rsa);
      const run = async () => {
        const nonce = await fetchNonce(baselined);
        const posture = await rsa.posture(client.clientKey.jkt, nonce);
        return (await exchange(baselined, { client, nonce, statement: tpmStatement(posture) })).res;
      };
      expect((await run()).status).toBe(200);
      await rsa.measure(23, Buffer.from('unknown-plugin.so'));
      const denied = await run();
      expect(denied.status).toBe(403);
      expect(denied.body.error).toBe('access_denied');
      expect(denied.body.reasons).toEqual(['pcr_mismatch']);
    } finally {
      await baselined.close();
    }
  });

  test('the access token names the TPM client', async () => {
    const { res, client } = await tpmExchange();
    expect(res.status).toBe(200);
    expect(decodePayload(res.body.access_token)).toMatchObject({ client_id: client.clientId });
    expect(nowSec(h)).toBeGreaterThan(0);
  });
});

describe('service attestation token (svc_att_token)', () => {
  async function tpmTokens(client: { clientId: string; clientKey: EcKey }) {
    const nonce = await fetchNonce(h);
    const posture = await rsa.posture(client.clientKey.jkt, nonce);
    return (await exchange(h, { client, nonce, statement: (s) => ({ ...s, posture_type: 'tpm', posture }) })).res;
  }

  test('after a TPM attestation the token response carries svc_att_token, verifiable with jwks_uri', async () => {
    const client = await registerTpmClient(rsa);
    const res = await tpmTokens(client);
    expect(res.status).toBe(200);
    const jwks = await request(h.app).get('/svc/v1/jwks');
    const { payload, protectedHeader } = await jwtVerify(res.body.svc_att_token, createLocalJWKSet(jwks.body), { issuer: h.publicUrl, typ: 'svc-att+jwt' });
    expect(protectedHeader.alg).toBe('ES256');
    const ak = tpmPublicKey(parseTpm2bPublic(await rsa.tools.ensureAk(), 'ak')).export({ format: 'jwk' }) as JWK;
    expect(payload).toMatchObject({
      sub: client.clientId,
      puk_ak_sig: await calculateJwkThumbprint(ak),
      hardware_bound: true,
      platform: 'linux',
      verification_status: 'SUCCESS',
      cnf: { jkt: client.clientKey.jkt },
    });
    expect(typeof payload.jti).toBe('string');
    expect(payload.exp! - payload.iat!).toBeGreaterThan(0);
    // Its typ keeps it from ever passing as an access token (the verifier requires at+jwt).
    expect(protectedHeader.typ).toBe('svc-att+jwt');
  });

  test('a software attestation gets no svc_att_token', async () => {
    const { res } = await exchange(h);
    expect(res.status).toBe(200);
    expect(res.body.svc_att_token).toBeUndefined();
  });

  describe('registration at another guard instance', () => {
    let other: Harness;
    beforeAll(async () => {
      other = await guardHarness({ env: { TRUSTED_ATTESTATION_ISSUERS: h.publicUrl } });
    });
    afterAll(() => other?.close());

    const signSelf = (key: EcKey) => crypto.sign('sha256', canonicalJwk(key), { key: key.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    const svcRegistration = (key: EcKey, token: string, extra: Record<string, unknown> = {}) => ({
      attestation_type: 'svc_attestation_token',
      token_endpoint_auth_method: 'private_key_jwt',
      grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange', 'refresh_token'],
      jwks: { keys: [{ ...key.publicJwk, use: 'sig' }] },
      svc_attestation_token: token,
      signed_hash_puk_client_sig: signSelf(key),
      ...extra,
    });

    test('201 pending_user_binding; the first token exchange binds the client (active)', async () => {
      const client = await registerTpmClient(rsa);
      const token = (await tpmTokens(client)).body.svc_att_token as string;
      const reg = await request(other.app).post('/svc/v1/register').send(svcRegistration(client.clientKey, token));
      expect(reg.status).toBe(201);
      expect(reg.body.status).toBe('pending_user_binding');
      const { res } = await exchange(other, { client: { clientId: reg.body.client_id, clientKey: client.clientKey } });
      expect(res.status).toBe(200);
      const row = await other.ctx.db.query<{ status: string; policy_input: { client_registration_data: { attestation_result: Record<string, unknown> } } }>(
        'SELECT c.status, s.policy_input FROM guard_client c JOIN guard_session s ON s.client_id = c.client_id WHERE c.client_id = $1',
        [reg.body.client_id],
      );
      expect(row.rows[0].status).toBe('active');
      expect(row.rows[0].policy_input.client_registration_data.attestation_result.svc_attestation_token).toMatchObject({ iss: h.publicUrl, hardware_bound: true });
      // Single use: the same token registers nothing else.
      const again = await request(other.app).post('/svc/v1/register').send(svcRegistration(await generateEcKey(), token));
      expect(again.status).toBe(400);
    });

    test('refused: untrusted issuer, another client key, a bad self-signature, a forged token', async () => {
      const client = await registerTpmClient(rsa);
      const token = (await tpmTokens(client)).body.svc_att_token as string;
      const stranger = await guardHarness({ db: other.ctx.db });
      try {
        expect((await request(stranger.app).post('/svc/v1/register').send(svcRegistration(client.clientKey, token))).status).toBe(400);
      } finally {
        await stranger.close();
      }
      const otherKey = await generateEcKey();
      const wrongKey = await request(other.app).post('/svc/v1/register').send(svcRegistration(otherKey, token));
      expect(wrongKey.status).toBe(400);
      expect(wrongKey.body.error_description).toMatch(/another client instance key/);
      const badSig = await request(other.app).post('/svc/v1/register').send(svcRegistration(client.clientKey, token, { signed_hash_puk_client_sig: signSelf(otherKey) }));
      expect(badSig.status).toBe(400);
      expect(badSig.body.error_description).toMatch(/^client_key_binding/);
      const [hd, pl, sig] = token.split('.');
      const claims = JSON.parse(Buffer.from(pl, 'base64url').toString());
      const forged = `${hd}.${Buffer.from(JSON.stringify({ ...claims, platform: 'windows' })).toString('base64url')}.${sig}`;
      const f = await request(other.app).post('/svc/v1/register').send(svcRegistration(client.clientKey, forged));
      expect(f.status).toBe(400);
      expect(f.body.error_description).toMatch(/does not verify/);
    });
  });
});
