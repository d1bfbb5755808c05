import request from 'supertest';
import { createClientAssertion, createDpopProof } from '../../src/client/crypto';
import { statementRecorder } from '../helpers/statements';
import { guardHarness, JWT_BEARER, loggedInClient, nowSec, refreshWith, type Harness } from './helpers/harness';

/**
 * A refresh of a token this process issued needs no read (RefreshFamilies) and rotates
 * in one statement; what can change in another replica (use, revocation) is still decided by the
 * store. Two applications on one store play two replicas.
 */
let a: Harness;
let b: Harness;
const recorder = statementRecorder();
const { sent } = recorder;

beforeAll(async () => {
  a = await guardHarness();
  b = await guardHarness({ db: a.ctx.db });
  recorder.start();
});

afterAll(async () => {
  recorder.stop();
  await b.close();
  await a.close();
});

async function revokeAt(h: Harness, c: Awaited<ReturnType<typeof loggedInClient>>, token: string) {
  return request(h.app)
    .post('/svc/v1/revoke')
    .type('form')
    .set('DPoP', await createDpopProof(c.dpopKey!, { method: 'POST', url: h.urls.revoke, iat: nowSec(h) }))
    .send(
      new URLSearchParams({
        token,
        client_assertion_type: JWT_BEARER,
        client_assertion: await createClientAssertion(c.clientKey!, { clientId: c.clientId!, audience: h.urls.token, now: nowSec(h) }),
      }).toString(),
    );
}

const storeStatements = () => sent.filter((s) => /guard_(refresh_token|session|client)\b/.test(s));

test('a refresh at the issuing application sends one statement to the store: the rotation', async () => {
  const c = await loggedInClient(a);
  const first = await refreshWith(a, c); // the client row is cached from now on
  expect(first.status).toBe(200);
  sent.length = 0;
  const second = await refreshWith(a, c, { refreshToken: first.body.refresh_token });
  expect(second.status).toBe(200);
  expect(storeStatements()).toHaveLength(1);
  sent.length = 0;
  const third = await refreshWith(a, c, { refreshToken: second.body.refresh_token });
  expect(third.status).toBe(200);
  expect(storeStatements()).toHaveLength(1);
  expect(storeStatements()[0]).toMatch(/UPDATE guard_refresh_token/);
});

test('a refresh token issued by one application is refreshed at the other (read from the store)', async () => {
  const c = await loggedInClient(a);
  const res = await refreshWith(b, c);
  expect(res.status).toBe(200);
  const back = await refreshWith(a, c, { refreshToken: res.body.refresh_token });
  expect(back.status).toBe(200);
});

test('a family revoked at the other application cannot be refreshed where its token was issued', async () => {
  const c = await loggedInClient(a);
  const rotated = await refreshWith(a, c);
  expect(rotated.status).toBe(200);
  expect((await revokeAt(b, c, rotated.body.refresh_token)).status).toBe(200);
  const after = await refreshWith(a, c, { refreshToken: rotated.body.refresh_token });
  expect(after.status).toBe(400);
  expect(after.body).toMatchObject({ error: 'invalid_grant', error_description: 'refresh token has been revoked' });
});

test('a token used at the other application is a reuse where it was issued: the family dies', async () => {
  const c = await loggedInClient(a);
  const token = c.tokens!.refreshToken;
  const atB = await refreshWith(b, c, { refreshToken: token });
  expect(atB.status).toBe(200);
  const atA = await refreshWith(a, c, { refreshToken: token });
  expect(atA.status).toBe(400);
  expect(atA.body.error_description).toMatch(/already used; the session has been revoked/);
  const newest = await refreshWith(b, c, { refreshToken: atB.body.refresh_token });
  expect(newest.status).toBe(400);
  expect(newest.body.error).toBe('invalid_grant');
});
