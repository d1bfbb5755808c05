import crypto from 'node:crypto';
import fs from 'node:fs';
import { compactDecrypt, createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import * as oauth from 'oauth4webapi';
import type { OidcProvider } from '../../../config';

/** Every outbound call to an IdP is bounded: a hung IdP must not hold a patient's login open. */
const TIMEOUT_MS = 5000;
/** Discovery documents are kept this long; a failed discovery is retried on the next login. */
const METADATA_TTL_MS = 3600_000;
/** Signature algorithms accepted on id_tokens (never `none`, never HMAC with a public secret). */
const ID_TOKEN_ALGS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512', 'EdDSA'];
const KEY_MANAGEMENT_ALGS = ['ECDH-ES', 'ECDH-ES+A128KW', 'ECDH-ES+A256KW', 'RSA-OAEP', 'RSA-OAEP-256'];
const CONTENT_ENCRYPTION_ALGS = ['A256GCM', 'A192GCM', 'A128GCM', 'A128CBC-HS256', 'A192CBC-HS384', 'A256CBC-HS512'];

/** The IdP could not be reached or answered nonsense: try again later (503 / `temporarily_unavailable`). */
export class IdpUnavailable extends Error {}

/** The IdP refused the login, or its answer does not prove one: the app hears `access_denied`. */
export class LoginRejected extends Error {}

/** An IdP as OIDC_PROVIDERS_FILE names it, listed at GET /openid-providers. */
export interface ProviderListing {
  iss: string;
  name: string;
  logo_uri?: string;
  type: 'oidc';
}

interface Loaded {
  provider: OidcProvider;
  client: oauth.Client;
  auth: oauth.ClientAuth;
  decryptionKey?: crypto.KeyObject;
  metadata?: { as: oauth.AuthorizationServer; jwks: ReturnType<typeof createRemoteJWKSet>; until: number };
}

/**
 * The relying-party side of the authorization-code flow (docs/requirements.md, Patients (authorization code flow)), on
 * oauth4webapi: discovery, PKCE S256, state and nonce, PAR at the IdP when it offers it,
 * private_key_jwt or a client secret, the RFC 9207 `iss` check, the code exchange with the
 * id_token's claims checked by the library, its JWE layer decrypted with our key, and its
 * signature verified with jose against the IdP's JWKS (oauth4webapi leaves that to TLS).
 */
export class UpstreamIdps {
  private readonly loaded = new Map<string, Promise<Loaded>>();

  constructor(
    private readonly providers: readonly OidcProvider[],
    private readonly now: () => Date,
  ) {}

  list(): ProviderListing[] {
    return this.providers.map((p) => ({ iss: p.iss, name: p.name, ...(p.logoUri ? { logo_uri: p.logoUri } : {}), type: 'oidc' }));
  }

  /** The provider `iss` names; none named: the only one, if there is exactly one. */
  choose(iss: string | undefined): OidcProvider | undefined {
    if (iss === undefined) return this.providers.length === 1 ? this.providers[0] : undefined;
    return this.providers.find((p) => p.iss === iss.replace(/\/+$/, ''));
  }

  /** Where the user's browser goes to log in: the IdP's authorization endpoint, after PAR when the IdP offers it. */
  async authorizationUrl(p: OidcProvider, r: { redirectUri: string; state: string; nonce: string; codeVerifier: string }): Promise<string> {
    const l = await this.load(p);
    const { as } = await this.metadataOf(l);
    if (!as.authorization_endpoint) throw new IdpUnavailable(`${p.iss} advertises no authorization_endpoint`);
    const params = new URLSearchParams({
      client_id: p.clientId,
      response_type: 'code',
      redirect_uri: r.redirectUri,
      scope: p.scopes.join(' '),
      state: r.state,
      nonce: r.nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(r.codeVerifier),
      code_challenge_method: 'S256',
    });
    const url = new URL(as.authorization_endpoint);
    if (as.pushed_authorization_request_endpoint) {
      const pushed = await this.call(() => oauth.pushedAuthorizationRequest(as, l.client, l.auth, params, this.requestOptions(p)));
      const result = await this.call(() => oauth.processPushedAuthorizationResponse(as, l.client, pushed));
      url.searchParams.set('client_id', p.clientId);
      url.searchParams.set('request_uri', result.request_uri);
    } else {
      for (const [k, v] of params) url.searchParams.set(k, v);
    }
    return url.href;
  }

  /**
   * The IdP's answer at the redirection endpoint: state and `iss` (RFC 9207), the code redeemed
   * with our PKCE verifier, the id_token decrypted, its claims (iss, aud, nonce, exp) and
   * signature checked. Returns its claims.
   */
  async finishLogin(p: OidcProvider, callback: URLSearchParams, r: { redirectUri: string; state: string; nonce: string; codeVerifier: string }): Promise<JWTPayload> {
    const l = await this.load(p);
    const { as, jwks } = await this.metadataOf(l);
    let params: URLSearchParams;
    try {
      params = oauth.validateAuthResponse(as, l.client, callback, r.state);
    } catch (err) {
      if (err instanceof oauth.AuthorizationResponseError) throw new LoginRejected(`the identity provider answered ${err.error}`);
      throw new LoginRejected(`the identity provider's answer is not valid: ${(err as Error).message}`);
    }
    let jws: string | undefined;
    const decrypt: oauth.JweDecryptFunction = async (jwe) => {
      if (!l.decryptionKey) throw new LoginRejected('the id_token is encrypted but no id_token_decryption_key is configured');
      try {
        const { plaintext } = await compactDecrypt(jwe, l.decryptionKey, { keyManagementAlgorithms: KEY_MANAGEMENT_ALGS, contentEncryptionAlgorithms: CONTENT_ENCRYPTION_ALGS });
        jws = new TextDecoder().decode(plaintext);
        return jws;
      } catch {
        throw new LoginRejected('the id_token does not decrypt with our id_token_decryption_key');
      }
    };
    const response = await this.call(() => oauth.authorizationCodeGrantRequest(as, l.client, l.auth, params, r.redirectUri, r.codeVerifier, this.requestOptions(p)));
    let tokens: oauth.TokenEndpointResponse;
    try {
      tokens = await oauth.processAuthorizationCodeResponse(as, l.client, response, { expectedNonce: r.nonce, requireIdToken: true, [oauth.jweDecrypt]: decrypt });
    } catch (err) {
      if (err instanceof LoginRejected) throw err;
      if (err instanceof oauth.ResponseBodyError) throw new LoginRejected(`the identity provider refused the code: ${err.error}`);
      if (err instanceof oauth.OperationProcessingError) throw new LoginRejected(`invalid_id_token: ${err.message}`);
      throw new IdpUnavailable(`the identity provider's token endpoint failed: ${(err as Error).message}`);
    }
    if (l.decryptionKey && jws === undefined) throw new LoginRejected('invalid_id_token: the id_token must be encrypted');
    const signed = jws ?? tokens.id_token!;
    try {
      const { payload } = await jwtVerify(signed, jwks, { issuer: p.iss, audience: p.clientId, algorithms: ID_TOKEN_ALGS, clockTolerance: 60, currentDate: this.now() });
      return payload;
    } catch (err) {
      throw new LoginRejected(`invalid_id_token: the signature does not verify with the provider's keys (${(err as Error).message})`);
    }
  }

  private requestOptions(p: OidcProvider) {
    return { signal: AbortSignal.timeout(TIMEOUT_MS), [oauth.allowInsecureRequests]: p.iss.startsWith('http:') };
  }

  /** An outbound step; transport failures and non-OAuth answers become IdpUnavailable. */
  private async call<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      if (err instanceof oauth.ResponseBodyError) throw new LoginRejected(`the identity provider refused: ${err.error}`);
      throw new IdpUnavailable(`the identity provider failed: ${(err as Error).message}`);
    }
  }

  private load(p: OidcProvider): Promise<Loaded> {
    let l = this.loaded.get(p.iss);
    if (!l) {
      l = loadProvider(p);
      this.loaded.set(p.iss, l);
    }
    return l;
  }

  private async metadataOf(l: Loaded): Promise<NonNullable<Loaded['metadata']>> {
    if (l.metadata && l.metadata.until > Date.now()) return l.metadata;
    const p = l.provider;
    const issuer = new URL(p.iss);
    const as = await this.call(async () =>
      oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...this.requestOptions(p) })),
    );
    if (!as.jwks_uri) throw new IdpUnavailable(`${p.iss} advertises no jwks_uri`);
    l.metadata = { as, jwks: createRemoteJWKSet(new URL(as.jwks_uri), { timeoutDuration: TIMEOUT_MS, cooldownDuration: 60_000 }), until: Date.now() + METADATA_TTL_MS };
    return l.metadata;
  }
}

/** The client of one provider: its authentication (a WebCrypto key for private_key_jwt) and decryption key. */
async function loadProvider(p: OidcProvider): Promise<Loaded> {
  const client: oauth.Client = { client_id: p.clientId, [oauth.clockTolerance]: 60 };
  let auth: oauth.ClientAuth;
  if (p.clientAuth === 'private_key_jwt') {
    const keyObject = crypto.createPrivateKey(fs.readFileSync(p.keyFile!));
    const rsa = keyObject.asymmetricKeyType === 'rsa';
    const algorithm = rsa ? { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } : { name: 'ECDSA', namedCurve: 'P-256' };
    const key = await crypto.webcrypto.subtle.importKey('pkcs8', keyObject.export({ type: 'pkcs8', format: 'der' }), algorithm, false, ['sign']);
    // kid: the RFC 7638 thumbprint of the public key, as the provider's registration names it.
    const jwk = crypto.createPublicKey(keyObject).export({ format: 'jwk' });
    const members = rsa ? { e: jwk.e, kty: 'RSA', n: jwk.n } : { crv: jwk.crv, kty: 'EC', x: jwk.x, y: jwk.y };
    const kid = crypto.createHash('sha256').update(JSON.stringify(members)).digest('base64url');
    auth = oauth.PrivateKeyJwt({ key: key as oauth.CryptoKey, kid });
  } else {
    auth = p.clientAuth === 'client_secret_post' ? oauth.ClientSecretPost(p.secret!) : oauth.ClientSecretBasic(p.secret!);
  }
  const decryptionKey = p.idTokenDecryptionKeyFile ? crypto.createPrivateKey(fs.readFileSync(p.idTokenDecryptionKeyFile)) : undefined;
  return { provider: p, client, auth, decryptionKey };
}
