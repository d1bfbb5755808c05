import request from 'supertest';
import { createClientAssertion, createDpopProof, generateEcKey } from '../../src/client/crypto';
import { decodePayload, guardHarness, JWT_BEARER, loggedInClient, nowSec, refreshWith, registerClient, type Harness } from './helpers/harness';

/** Refresh (docs/requirements.md#refresh-and-revocation, ZETA UC11/UC25) and revocation (RFC 7009). */
let h: Harness;
beforeAll(async () => {
  h = await guardHarness();
});
afterAll(() => h.close());

describe('refresh', () => {
  test('rotates: new access and refresh tokens, same sid, sub, client_id and cnf.jkt, new jti', async () => {
    const c = await loggedInClient(h);
    const before = c.tokens!;
    const res = await refreshWith(h, c);
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('DPoP');
    expect(res.body.refresh_token).not.toBe(before.refreshToken);
    expect(res.body.access_token).not.toBe(before.accessToken);
    const old = decodePayload(before.accessToken);
    const now = decodePayload(res.body.access_token);
    for (const claim of ['sid', 'sub', 'client_id', 'profession_oid', 'common_name', 'scope']) expect(now[claim]).toEqual(old[claim]);
    expect(now.cnf).toEqual({ jkt: c.dpopKey!.jkt });
    expect(now.jti).not.toBe(old.jti);
  });

  test('the rotated token works for the next refresh; no subject token needed', async () => {
    const c = await loggedInClient(h);
    await c.refresh();
    const second = await c.refresh();
    expect(second.accessToken).toBeTruthy();
  });

  test('reusing a rotated refresh token is 400 invalid_grant and revokes the whole family (RFC 9700 §4.14.2)', async () => {
    const c = await loggedInClient(h);
    const old = c.tokens!.refreshToken;
    const rotated = await refreshWith(h, c);
    expect(rotated.status).toBe(200);
    const reuse = await refreshWith(h, c, { refreshToken: old });
    expect(reuse.status).toBe(400);
    expect(reuse.body.error).toBe('invalid_grant');
    // the family is dead: the newest token fails too
    const newest = await refreshWith(h, c, { refreshToken: rotated.body.refresh_token });
    expect(newest.status).toBe(400);
    expect(newest.body.error).toBe('invalid_grant');
  });

  test('two refreshes racing with one token: exactly one wins, the family is revoked', async () => {
    const c = await loggedInClient(h);
    const results = await Promise.all([refreshWith(h, c), refreshWith(h, c), refreshWith(h, c)]);
    const ok = results.filter((r) => r.status === 200);
    const failed = results.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(1);
    expect(failed.every((r) => r.status === 400 && r.body.error === 'invalid_grant')).toBe(true);
    const winner = await refreshWith(h, c, { refreshToken: ok[0].body.refresh_token });
    expect(winner.status).toBe(400);
    expect(winner.body.error).toBe('invalid_grant');
  });

  test('a proof signed by another DPoP key is 400 invalid_grant, not 401', async () => {
    const c = await loggedInClient(h);
    const res = await refreshWith(h, c, { dpopKey: await generateEcKey() });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });

  test("client B cannot use client A's refresh token", async () => {
    const c = await loggedInClient(h);
    const other = await registerClient(h);
    const res = await refreshWith(h, c, { client: other });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });

  test('an unknown refresh token is 400 invalid_grant', async () => {
    const c = await loggedInClient(h);
    const res = await refreshWith(h, c, { refreshToken: 'nope' });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });

  test('an expired refresh token is 400 invalid_grant', async () => {
    const c = await loggedInClient(h);
    h.ctx.clock.advance(86_401_000);
    try {
      const res = await refreshWith(h, c);
      expect(res.status).toBe(400);
      expect(res.body.error).toBe('invalid_grant');
    } finally {
      h.ctx.clock.advance(-86_401_000);
    }
  });

  test('the family lifetime is capped: rotation never extends past the first refresh token', async () => {
    const c = await loggedInClient(h);
    h.ctx.clock.advance(86_000_000);
    try {
      const res = await refreshWith(h, c);
      expect(res.status).toBe(200);
      expect(res.body.refresh_expires_in).toBeLessThanOrEqual(400);
    } finally {
      h.ctx.clock.advance(-86_000_000);
    }
  });

  test('a refresh with a client_statement is 400 invalid_request', async () => {
    const c = await loggedInClient(h);
    const res = await refreshWith(h, c, { assertion: { clientStatement: { sub: c.clientId } } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
  });

  test('a refresh without client authentication is 401 invalid_client', async () => {
    const c = await loggedInClient(h);
    const res = await refreshWith(h, c, { form: { client_assertion: undefined, client_assertion_type: undefined } });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
  });

  test('a refresh without refresh_token is 400 invalid_request', async () => {
    const c = await loggedInClient(h);
    const res = await refreshWith(h, c, { form: { refresh_token: undefined } });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_request');
  });

  test('a refresh may narrow the scope, never widen it', async () => {
    const c = await loggedInClient(h);
    const narrow = await refreshWith(h, c, { form: { scope: 'system/Slot.rs' } });
    expect(narrow.status).toBe(200);
    expect(narrow.body.scope).toBe('system/Slot.rs');
    const c2 = await loggedInClient(h);
    const wide = await refreshWith(h, c2, { form: { scope: 'system/*.cruds' } });
    expect(wide.status).toBe(400);
    expect(wide.body.error).toBe('invalid_scope');
  });

  test('a refresh proof may carry a fresh nonce; a bad one is 400 use_dpop_nonce', async () => {
    const c = await loggedInClient(h);
    const nonce = (await request(h.app).get('/svc/v1/nonce')).body.nonce;
    expect((await refreshWith(h, c, { nonce })).status).toBe(200);
    const bad = await refreshWith(h, c, { nonce });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('use_dpop_nonce');
  });
});

describe('revocation (RFC 7009)', () => {
  async function revoke(c: Awaited<ReturnType<typeof loggedInClient>>, token: string, extra: Record<string, string> = {}) {
    const url = h.urls.revoke;
    return request(h.app)
      .post('/svc/v1/revoke')
      .type('form')
      .set('DPoP', await createDpopProof(c.dpopKey!, { method: 'POST', url, iat: nowSec(h) }))
      .send(
        new URLSearchParams({
          token,
          client_assertion_type: JWT_BEARER,
          client_assertion: await createClientAssertion(c.clientKey!, { clientId: c.clientId!, audience: h.urls.token, now: nowSec(h) }),
          ...extra,
        }).toString(),
      );
  }

  test('revoking the refresh token is 200 and kills the family', async () => {
    const c = await loggedInClient(h);
    const rt = c.tokens!.refreshToken;
    const res = await revoke(c, rt, { token_type_hint: 'refresh_token' });
    expect(res.status).toBe(200);
    const after = await refreshWith(h, c, { refreshToken: rt });
    expect(after.status).toBe(400);
    expect(after.body.error).toBe('invalid_grant');
  });

  test('revoking the access token revokes its session too', async () => {
    const c = await loggedInClient(h);
    const res = await revoke(c, c.tokens!.accessToken, { token_type_hint: 'access_token' });
    expect(res.status).toBe(200);
    expect((await refreshWith(h, c)).status).toBe(400);
  });

  test('an unknown token is 200 all the same', async () => {
    const c = await loggedInClient(h);
    expect((await revoke(c, 'unknown-token')).status).toBe(200);
  });

  test("another client's token is 200 but stays valid", async () => {
    const victim = await loggedInClient(h);
    const attacker = await loggedInClient(h, { telematikId: '1-ATTACKER' });
    expect((await revoke(attacker, victim.tokens!.refreshToken)).status).toBe(200);
    expect((await refreshWith(h, victim)).status).toBe(200);
  });

  test('the client library revokes its session', async () => {
    const c = await loggedInClient(h);
    const rt = c.tokens!.refreshToken;
    await c.revoke();
    expect((await refreshWith(h, c, { refreshToken: rt })).status).toBe(400);
  });

  test('revocation without token is 400 invalid_request; without client authentication 401 invalid_client', async () => {
    const c = await loggedInClient(h);
    const noToken = await request(h.app)
      .post('/svc/v1/revoke')
      .type('form')
      .set('DPoP', await createDpopProof(c.dpopKey!, { method: 'POST', url: h.urls.revoke, iat: nowSec(h) }))
      .send('token_type_hint=refresh_token');
    expect(noToken.status).toBe(400);
    expect(noToken.body.error).toBe('invalid_request');
    const noAuth = await request(h.app)
      .post('/svc/v1/revoke')
      .type('form')
      .set('DPoP', await createDpopProof(c.dpopKey!, { method: 'POST', url: h.urls.revoke, iat: nowSec(h) }))
      .send(`token=${c.tokens!.refreshToken}`);
    expect(noAuth.status).toBe(401);
    expect(noAuth.body.error).toBe('invalid_client');
  });

  test('revocation without a DPoP proof is 400 invalid_dpop_proof', async () => {
    const c = await loggedInClient(h);
    const res = await request(h.app)
      .post('/svc/v1/revoke')
      .type('form')
      .send(new URLSearchParams({ token: c.tokens!.refreshToken, client_assertion_type: JWT_BEARER, client_assertion: await createClientAssertion(c.clientKey!, { clientId: c.clientId!, audience: h.urls.token, now: nowSec(h) }) }).toString());
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_dpop_proof');
  });
});
