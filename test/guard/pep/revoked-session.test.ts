import request from 'supertest';
import { createClientAssertion, createDpopProof, generateEcKey, type EcKey } from '../../../src/client/crypto';
import { endpoints } from '../../../src/guard/settings';
import { LIVE_SESSION_CACHE_MS, RevokedSessions } from '../../../src/guard/state/revoked-sessions';
import type { TestToken } from '../helpers/get-token';
import { JWT_BEARER } from '../helpers/harness';
import { call, challenge, decodePayload, institution, nowSec, pepHarness, type PepHarness } from './helpers';

/**
 * Revocation reaches access tokens (RFC 7009; docs/requirements.md#refresh-and-revocation: reusing a
 * refresh token revokes the family's access tokens too): the enforcement point checks the token's
 * `sid` against guard_session.
 */
let h: PepHarness;
beforeAll(async () => {
  h = await pepHarness();
});
afterAll(() => h.close());

const urls = () => endpoints(h.ctx.config.publicUrl);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function revoke(app: PepHarness['app'], t: TestToken, token: string, o: { dpopKey?: EcKey } = {}) {
  const { revoke: url, token: tokenUrl } = urls();
  return request(app)
    .post('/svc/v1/revoke')
    .type('form')
    .set('DPoP', await createDpopProof(o.dpopKey ?? t.dpopKey, { method: 'POST', url, iat: nowSec(h) }))
    .send(
      new URLSearchParams({
        token,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(t.client.clientKey!, { clientId: t.clientId, audience: tokenUrl, now: nowSec(h) }),
      }).toString(),
    );
}

async function refresh(t: TestToken, refreshToken: string) {
  const url = urls().token;
  return request(h.app)
    .post('/svc/v1/token')
    .type('form')
    .set('DPoP', await createDpopProof(t.dpopKey, { method: 'POST', url, iat: nowSec(h) }))
    .send(
      new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(t.client.clientKey!, { clientId: t.clientId, audience: url, now: nowSec(h) }),
      }).toString(),
    );
}

function expectRevoked(res: request.Response) {
  expect(res.status).toBe(401);
  expect(res.body.error).toBe('invalid_token');
  expect(res.headers['www-authenticate']).toBe(challenge('invalid_token'));
}

test('after /revoke the old access token is 401 invalid_token at once', async () => {
  const t = await institution(h, { telematikId: '1-REVOKE-AT' });
  expect((await call(h, t, 'GET', '/Slot')).status).toBe(200);
  expect((await revoke(h.app, t, t.refreshToken)).status).toBe(200);
  expectRevoked(await call(h, t, 'GET', '/Slot'));
});

test('refresh-token reuse revokes the access tokens of the whole family', async () => {
  const t = await institution(h, { telematikId: '1-REUSE-AT' });
  const rotated = await refresh(t, t.refreshToken);
  expect(rotated.status).toBe(200);
  const newest = rotated.body.access_token as string;
  expect((await call(h, t, 'GET', '/Slot', { token: newest })).status).toBe(200);
  const reuse = await refresh(t, t.refreshToken);
  expect(reuse.status).toBe(400);
  expect(reuse.body.error).toBe('invalid_grant');
  expectRevoked(await call(h, t, 'GET', '/Slot'));
  expectRevoked(await call(h, t, 'GET', '/Slot', { token: newest }));
});

test('a proof from another key does not revoke (200 all the same, RFC 7009 §2.2)', async () => {
  const t = await institution(h, { telematikId: '1-REVOKE-OTHER-KEY' });
  expect((await revoke(h.app, t, t.refreshToken, { dpopKey: await generateEcKey() })).status).toBe(200);
  expect((await call(h, t, 'GET', '/Slot')).status).toBe(200);
  expect((await refresh(t, t.refreshToken)).status).toBe(200);
});

test('a second app instance on the same database (a replica: it shares nothing in memory) sees a revocation by the first within the live cache', async () => {
  const other = await pepHarness({ db: h.ctx.db });
  try {
    const t = await institution(h, { telematikId: '1-REVOKE-REPLICA' });
    expect((await call(other, t, 'GET', '/Slot')).status).toBe(200);
    expect((await revoke(h.app, t, t.refreshToken)).status).toBe(200);
    // The revoking instance refuses at once; the other one once its live answer is older than 1 s.
    expectRevoked(await call(h, t, 'GET', '/Slot'));
    await sleep(LIVE_SESSION_CACHE_MS + 100);
    expectRevoked(await call(other, t, 'GET', '/Slot'));
  } finally {
    await other.close();
  }
});

test('a revocation written by another process reaches this one within the 1 s live cache', async () => {
  const t = await institution(h, { telematikId: '1-REVOKE-ELSEWHERE' });
  expect((await call(h, t, 'GET', '/Slot')).status).toBe(200);
  // What another replica's /revoke does to the shared store, without this process hearing of it.
  await h.ctx.db.query('UPDATE guard_session SET revoked_at = now() WHERE sid = $1', [decodePayload(t.accessToken).sid]);
  await sleep(LIVE_SESSION_CACHE_MS + 100);
  expectRevoked(await call(h, t, 'GET', '/Slot'));
});

test('a sid this store never issued is not live (the token is refused)', async () => {
  const sessions = new RevokedSessions(h.ctx.db);
  expect(await sessions.isLive('00000000-0000-4000-8000-000000000000')).toBe(false);
});

test('the check is cheap: one lookup per sid and second, shared by concurrent requests', async () => {
  const t = await institution(h, { telematikId: '1-REVOKE-CHEAP' });
  const sid = decodePayload(t.accessToken).sid as string;
  let queries = 0;
  const counting = { query: (...a: Parameters<typeof h.ctx.db.query>) => ((queries += 1), h.ctx.db.query(...a)) } as unknown as typeof h.ctx.db;
  const sessions = new RevokedSessions(counting);
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: 50 }, () => sessions.isLive(sid)));
  for (let i = 0; i < 1000; i += 1) await sessions.isLive(sid);
  expect(answers.every(Boolean)).toBe(true);
  expect(queries).toBeLessThanOrEqual(2);
  expect(performance.now() - started).toBeLessThan(LIVE_SESSION_CACHE_MS);
});
