/**
 * node-oidc-provider 9 as the baseline of the guard refresh benchmark: private_key_jwt client,
 * DPoP-bound rotating refresh tokens, its default in-memory adapter. Started by bench/guard.ts in
 * its own process; `GET /bench/mint?jkt=…` mints a refresh token bound to a DPoP key thumbprint.
 */
import http from 'node:http';

async function main(): Promise<void> {
  const port = Number(process.env.PORT);
  const issuer = `http://127.0.0.1:${port}`;
  const clientJwk = JSON.parse(process.env.BENCH_CLIENT_JWK ?? '{}') as Record<string, string>;
  // Untyped ESM package: imported through a variable so the compiler does not look for typings.
  const pkg = 'oidc-provider';
  const { default: Provider } = (await import(pkg)) as { default: new (issuer: string, config: unknown) => any };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'bench',
        token_endpoint_auth_method: 'private_key_jwt',
        token_endpoint_auth_signing_alg: 'ES256',
        jwks: { keys: [clientJwk] },
        grant_types: ['authorization_code', 'refresh_token'],
        redirect_uris: ['https://rp.example/cb'],
        response_types: ['code'],
      },
    ],
    scopes: ['openid', 'offline_access'],
    rotateRefreshToken: true,
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    ttl: { AccessToken: 300, RefreshToken: 86400, Grant: 86400 },
  });
  const callback = provider.callback();
  const server = http.createServer(async (req, res) => {
    if (req.url?.startsWith('/bench/mint')) {
      const jkt = new URL(req.url, issuer).searchParams.get('jkt')!;
      const grant = new provider.Grant({ accountId: 'acc-1', clientId: 'bench' });
      grant.addOIDCScope('openid offline_access');
      const grantId = await grant.save();
      const client = await provider.Client.find('bench');
      const now = Math.floor(Date.now() / 1000);
      const rt = new provider.RefreshToken({ accountId: 'acc-1', client, grantId, scope: 'openid offline_access', gty: 'authorization_code', authTime: now, iiat: now, jkt });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ refresh_token: await rt.save() }));
      return;
    }
    callback(req, res);
  });
  server.listen(port, '127.0.0.1', () => process.stdout.write(`oidc-provider listening ${issuer}\n`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
