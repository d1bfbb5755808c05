// A real OpenID provider (panva/oidc-provider) as the upstream IdP of the authorization-code flow,
// run as its own Node process: oidc-provider is ESM only. Configuration comes as JSON in
// IDP_CONFIG: { clients: [oidc-provider client metadata], claims?: {accountId: {claim: value}},
// par?: false (no pushed authorization requests) }.
// Prints `IDP_READY <issuer>` once it listens on 127.0.0.1.
//
// For the negative tests, `POST /__tamper` (JSON) makes the next token response carry an id_token
// the IdP builds itself from the authorization code it redeemed: `claims` overriding any claim
// (iss, aud, nonce, ...), `foreignSigningKey` signing it with a key not in the IdP's JWKS,
// `foreignEncryptionKey` encrypting it to a key the client does not hold.
import crypto from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';
import { CompactEncrypt, SignJWT, importJWK } from 'jose';

const config = JSON.parse(process.env.IDP_CONFIG ?? '{}');

function es256Jwk() {
  const jwk = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: crypto.randomUUID(), alg: 'ES256', use: 'sig' };
}

const signingKey = es256Jwk();
const foreignKey = es256Jwk();
let tamper;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: config.clients ?? [],
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  features: {
    devInteractions: { enabled: true },
    pushedAuthorizationRequests: { enabled: config.par !== false, requirePushedAuthorizationRequests: false },
    encryption: { enabled: true },
  },
  pkce: { required: () => true },
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], profile: ['name', 'birthdate'] },
  findAccount: (_ctx, accountId) => ({
    accountId,
    claims: () => ({ sub: accountId, ...(config.claims?.[accountId] ?? {}) }),
  }),
  ttl: { AuthorizationCode: 60, PushedAuthorizationRequest: 90, Interaction: 600, Session: 600, Grant: 600 },
});

provider.use(async (ctx, next) => {
  if (ctx.path === '/__tamper' && ctx.method === 'POST') {
    let body = '';
    for await (const chunk of ctx.req) body += chunk;
    tamper = JSON.parse(body || '{}');
    ctx.status = 204;
    return;
  }
  await next();
  if (ctx.path !== '/token' || !tamper || ctx.status !== 200 || !ctx.body?.id_token) return;
  const t = tamper;
  tamper = undefined;
  const code = ctx.oidc.entities.AuthorizationCode;
  const client = ctx.oidc.entities.Client;
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: issuer, sub: code.accountId, aud: client.clientId, nonce: code.nonce, iat: now, exp: now + 300, ...(t.claims ?? {}) };
  const key = t.foreignSigningKey ? foreignKey : signingKey;
  let idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: key.kid }).sign(await importJWK(key, 'ES256'));
  const alg = client.idTokenEncryptedResponseAlg;
  if (alg) {
    const enc = client.idTokenEncryptedResponseEnc ?? 'A128CBC-HS256';
    const target = t.foreignEncryptionKey
      ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' })
      : client.jwks.keys.find((k) => k.use === 'enc');
    idToken = await new CompactEncrypt(new TextEncoder().encode(idToken))
      .setProtectedHeader({ alg, enc, cty: 'JWT', ...(target.kid ? { kid: target.kid } : {}) })
      .encrypt(await importJWK(target, alg));
  }
  ctx.body = { ...ctx.body, id_token: idToken };
});

server.on('request', provider.callback());
process.stdout.write(`IDP_READY ${issuer}\n`);
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
