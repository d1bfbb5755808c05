import * as oauth from 'oauth4webapi';
import { scopeCovered } from '../../../common/smart-scopes';
import { GRANT_AUTHORIZATION_CODE } from '../../../common/oauth';
import { InvalidRequest, InvalidScope, UnauthorizedClient, UnsupportedResponseType } from '../../errors';
import { patientScopes } from '../../policy';
import type { GuardDeps } from '../deps';
import { authenticateClient, formParameters, type EndpointRequest } from '../token-endpoint';
import { newHandle, redeemAuthorization, saveAuthorization, type AuthorizedUser, type PushedRequest, type UpstreamLogin } from './authorizations';
import { IdpUnavailable, LoginRejected } from './upstream-idps';

/** RFC 9126 §2.2: request URIs are short-lived (60 s), and so are codes (RFC 6749 §4.1.2). */
export const REQUEST_URI_TTL_SEC = 60;
export const CODE_TTL_SEC = 60;
/** The user's time at the IdP (login and consent). */
const LOGIN_TTL_SEC = 600;
const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';
const BASE64URL_43 = /^[A-Za-z0-9_-]{43}$/;
/** The German statutory insurance number (KVNR): a capital letter and nine digits. */
const KVNR = /^[A-Z][0-9]{9}$/;

/** A 302 and where it goes. */
export interface Redirect {
  location: string;
}

/**
 * POST /par (RFC 9126, docs/requirements.md, Patients (authorization code flow)): a registered client, authenticated by private_key_jwt,
 * pushes its authorization request; PKCE S256 only, a registered redirect URI, `state`, scopes
 * within the patient scopes, an IdP of OIDC_PROVIDERS_FILE. → `{request_uri, expires_in}`.
 */
export async function pushAuthorizationRequest(deps: GuardDeps, req: EndpointRequest): Promise<{ request_uri: string; expires_in: number }> {
  const params = formParameters(req);
  const auth = await authenticateClient(deps, params, req, { audiences: [deps.settings.issuer, deps.urls.par] });
  const { client } = auth;
  if (params.has('request')) throw new InvalidRequest('request objects are not supported: push the parameters as a form');
  if (params.get('response_type') !== 'code') throw new UnsupportedResponseType('response_type must be code');
  if (params.get('client_id') !== client.clientId) throw new InvalidRequest('client_id is required and must name the authenticated client');
  if (!client.grantTypes.includes(GRANT_AUTHORIZATION_CODE)) throw new UnauthorizedClient('this client is not registered for the authorization_code grant');
  const redirectUri = params.get('redirect_uri');
  if (!redirectUri || !(client.redirectUris ?? []).includes(redirectUri)) throw new InvalidRequest('redirect_uri must be one of the client\'s registered redirect_uris');
  const method = params.get('code_challenge_method');
  if (method !== 'S256') throw new InvalidRequest('code_challenge_method must be S256 (plain is not accepted)');
  const codeChallenge = params.get('code_challenge') ?? '';
  if (!BASE64URL_43.test(codeChallenge)) throw new InvalidRequest('code_challenge must be the base64url SHA-256 of the code verifier (43 characters)');
  const state = params.get('state');
  if (!state || state.length > 512) throw new InvalidRequest('state is required (at most 512 characters)');
  const scope = scopesArePatientScopes(deps, params.get('scope'));
  const idp = deps.idps.choose(params.get('idp_iss'));
  if (!idp) throw new InvalidRequest(params.has('idp_iss') ? 'idp_iss names no identity provider of this server (see openid_providers_endpoint)' : 'idp_iss is required: choose an identity provider from openid_providers_endpoint');
  const dpopJkt = params.get('dpop_jkt');
  if (dpopJkt !== undefined && !BASE64URL_43.test(dpopJkt)) throw new InvalidRequest('dpop_jkt must be a base64url SHA-256 JWK thumbprint');
  const pushed: PushedRequest = { clientId: client.clientId, redirectUri, codeChallenge, scope, state, idpIss: idp.iss, ...(dpopJkt ? { dpopJkt } : {}) };
  const handle = newHandle();
  await saveAuthorization(deps.ctx, 'request_uri', handle, client.clientId, pushed, REQUEST_URI_TTL_SEC);
  return { request_uri: `${REQUEST_URI_PREFIX}${handle}`, expires_in: REQUEST_URI_TTL_SEC };
}

/**
 * GET /authorize?client_id&request_uri: the pushed request (single use) sends the browser to the
 * IdP with this guard's own PKCE, state and nonce. A bad request_uri is 400 JSON, never a redirect
 * (the redirect URI is not known to be the client's); an unreachable IdP goes back to the app.
 */
export async function authorize(deps: GuardDeps, query: URLSearchParams): Promise<Redirect> {
  const clientId = single(query, 'client_id');
  const requestUri = single(query, 'request_uri');
  if (!clientId) throw new InvalidRequest('client_id is required');
  if (!requestUri) throw new InvalidRequest('request_uri is required: push the authorization request to the pushed_authorization_request_endpoint first');
  if (!requestUri.startsWith(REQUEST_URI_PREFIX)) throw new InvalidRequest('request_uri is unknown, expired or used');
  const redeemed = await redeemAuthorization<PushedRequest>(deps.ctx, 'request_uri', requestUri.slice(REQUEST_URI_PREFIX.length));
  if (!redeemed || redeemed.reused) throw new InvalidRequest('request_uri is unknown, expired or used');
  if (redeemed.clientId !== clientId) throw new InvalidRequest('request_uri was pushed by another client');
  const pushed = redeemed.data;
  const idp = deps.idps.choose(pushed.idpIss);
  if (!idp) return toApp(deps, pushed, { error: 'server_error', error_description: 'the identity provider is no longer configured' });
  const login: UpstreamLogin = { ...pushed, nonce: oauth.generateRandomNonce(), codeVerifier: oauth.generateRandomCodeVerifier() };
  const state = newHandle();
  await saveAuthorization(deps.ctx, 'login', state, pushed.clientId, login, LOGIN_TTL_SEC);
  try {
    return { location: await deps.idps.authorizationUrl(idp, { redirectUri: deps.urls.redirection, state, nonce: login.nonce, codeVerifier: login.codeVerifier }) };
  } catch (err) {
    return toApp(deps, pushed, loginError(deps, err));
  }
}

/**
 * The redirection endpoint: the IdP's answer for a login this guard started (its `state`, single
 * use). The id_token proves the user; the insurance number (KVNR) it names becomes the subject
 * of this guard's own authorization code, sent to the app's redirect URI with the app's state and
 * our `iss` (RFC 9207). A refused or unprovable login goes back to the app as `access_denied`.
 */
export async function redirection(deps: GuardDeps, query: URLSearchParams): Promise<Redirect> {
  const state = single(query, 'state');
  if (!state) throw new InvalidRequest('state is required');
  const redeemed = await redeemAuthorization<UpstreamLogin>(deps.ctx, 'login', state);
  if (!redeemed || redeemed.reused) throw new InvalidRequest('state is unknown, expired or used');
  const login = redeemed.data;
  const idp = deps.idps.choose(login.idpIss);
  if (!idp) return toApp(deps, login, { error: 'server_error', error_description: 'the identity provider is no longer configured' });
  let claims;
  try {
    claims = await deps.idps.finishLogin(idp, query, { redirectUri: deps.urls.redirection, state, nonce: login.nonce, codeVerifier: login.codeVerifier });
  } catch (err) {
    return toApp(deps, login, loginError(deps, err));
  }
  const kvnr = claims[idp.userIdClaim];
  if (typeof kvnr !== 'string' || !KVNR.test(kvnr)) {
    return toApp(deps, login, { error: 'access_denied', error_description: `no_kvnr: the identity provider's ${idp.userIdClaim} claim is not an insurance number (KVNR)` });
  }
  const { nonce: _n, codeVerifier: _v, ...pushed } = login;
  const authorized: AuthorizedUser = { ...pushed, user: { iss: idp.iss, sub: String(claims.sub), kvnr, ...(typeof claims.name === 'string' ? { name: claims.name } : {}) } };
  const code = newHandle();
  await saveAuthorization(deps.ctx, 'code', code, login.clientId, authorized, CODE_TTL_SEC);
  return toApp(deps, login, { code });
}

/** The app's redirect URI with the answer, its `state` and our `iss` (RFC 9207). */
function toApp(deps: GuardDeps, pushed: PushedRequest, answer: Record<string, string>): Redirect {
  const url = new URL(pushed.redirectUri);
  for (const [k, v] of Object.entries({ ...answer, state: pushed.state, iss: deps.settings.issuer })) url.searchParams.set(k, v);
  return { location: url.href };
}

function loginError(deps: GuardDeps, err: unknown): Record<string, string> {
  if (err instanceof LoginRejected) return { error: 'access_denied', error_description: err.message };
  if (err instanceof IdpUnavailable) {
    deps.ctx.logger.warn({ err: err.message }, 'guard: identity provider unavailable');
    return { error: 'temporarily_unavailable', error_description: 'the identity provider could not be reached; try again later' };
  }
  throw err;
}

/** `scope`: space-separated, each within the patient scopes of the policy (`openid` passes, it names the login). */
function scopesArePatientScopes(deps: GuardDeps, raw: string | undefined): string[] {
  const asked = [...new Set((raw ?? '').split(' ').filter(Boolean))].filter((s) => s !== 'openid');
  const allowed = patientScopes(deps.policyData);
  if (asked.length === 0) return allowed;
  const outside = asked.filter((s) => !scopeCovered(s, allowed));
  if (outside.length) throw new InvalidScope(`not granted to patients: ${outside.slice(0, 5).join(' ')}`);
  return asked;
}

/** One value of a query parameter; a repeated one is a malformed request. */
function single(query: URLSearchParams, name: string): string | undefined {
  const all = query.getAll(name);
  if (all.length > 1) throw new InvalidRequest(`${name} must not be repeated`);
  return all[0] || undefined;
}
