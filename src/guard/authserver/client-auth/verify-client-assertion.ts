import type { JWTPayload } from 'jose';
import { claimsOf, decodeCompactJws, MalformedJws, type CompactJws } from '../../jose/compact-jws';
import { es256Verifies, type Es256KeyCache } from '../../jose/es256';
import type { AppContext } from '../../../context';
import { InvalidClient, InvalidRequest } from '../../errors';
import { oneAuthorization } from '../../http/authorization-header';
import type { GuardSettings } from '../../settings';
import { stateKey, type SingleUse } from '../../state/shared-state';
import type { ActiveClients, ClientRecord } from '../clients/client-store';
import { CLIENT_ASSERTION_TYPE_JWT } from '../../../common/oauth';

/** The one signature algorithm for client assertions (FAPI 2.0: no RS256, no HS256). */
export const CLIENT_ASSERTION_ALGS = ['ES256'] as const;

export interface ClientAssertionInput {
  params: Map<string, string>;
  /** The request's Authorization header: a second authentication mechanism is refused. */
  authorization?: string | readonly string[];
  /** Accepted `aud` values: the issuer and the token endpoint URL, each as a single string. */
  audiences: string[];
  /** Registered clients (the store, through the active-client cache). */
  clients: ActiveClients;
  /** false: a cached active client will do (the grant reads only its id, key and grant types). */
  fresh: boolean;
  /** Imported client keys. */
  keys: Es256KeyCache;
}

export interface AuthenticatedClient {
  client: ClientRecord;
  claims: JWTPayload & { client_statement?: unknown };
  /** The assertion's jti, still to be recorded as used (RFC 7523 §3 #16, #17): the caller's round trip. */
  assertionUse: SingleUse;
}

/**
 * private_key_jwt client authentication (RFC 7521 §4.2, RFC 7523 §3), the steps of
 * RFC 7523 §3 in order. Malformed requests are 400 `invalid_request`; every
 * failure to authenticate is 401 `invalid_client` and never echoes the input.
 */
export async function verifyClientAssertion(ctx: AppContext, settings: GuardSettings, input: ClientAssertionInput): Promise<AuthenticatedClient> {
  const { params } = input;
  onlyOneAuthenticationMechanism(input); // #21
  const assertion = assertionTypeIsJwtBearer(params); // #1-#3
  const { decoded, header, claims } = assertionIsWellFormed(assertion); // #4
  algIsAllowed(header); // #18, #19
  typIsJwtWhenPresent(header);
  const clientId = issAndSubNameTheClient(claims); // #5, #6
  bodyClientIdMatches(params, clientId); // #7
  const client = await clientIsRegistered(ctx, settings, clientId, input);
  signatureVerifiesWithRegisteredKey(decoded, client, input.keys); // #20
  audienceIsThisServer(claims, input.audiences); // #8-#11
  const now = Math.floor(ctx.now().getTime() / 1000);
  expiryIsPresentAndNear(claims, now, settings); // #12, #13
  notIssuedInTheFuture(claims, now, settings); // #14, #15
  const assertionUse = jtiIsPresent(claims, clientId, settings); // #16, #17 (recorded by the caller)
  return { client, claims, assertionUse };
}

function onlyOneAuthenticationMechanism(input: ClientAssertionInput): void {
  const authorization = oneAuthorization(input.authorization);
  if (authorization && !/^dpop\s/i.test(authorization)) {
    throw new InvalidRequest('client authentication must only be provided using one mechanism');
  }
  if (input.params.has('client_secret')) throw new InvalidRequest('client authentication must only be provided using one mechanism');
}

function assertionTypeIsJwtBearer(params: Map<string, string>): string {
  const type = params.get('client_assertion_type');
  const assertion = params.get('client_assertion');
  if (type === undefined && assertion === undefined) throw new InvalidClient('client authentication is required (private_key_jwt)');
  if (type === undefined) throw new InvalidRequest('client_assertion_type must be provided');
  if (type !== CLIENT_ASSERTION_TYPE_JWT) throw new InvalidRequest(`client_assertion_type must be ${CLIENT_ASSERTION_TYPE_JWT}`);
  if (!assertion) throw new InvalidRequest('client_assertion must be provided');
  return assertion;
}

function assertionIsWellFormed(assertion: string): { decoded: CompactJws; header: Record<string, unknown>; claims: JWTPayload & { client_statement?: unknown } } {
  try {
    const jws = decodeCompactJws(assertion);
    return { decoded: jws, header: jws.header, claims: claimsOf(jws) as JWTPayload };
  } catch (err) {
    if (err instanceof MalformedJws) throw new InvalidRequest('invalid client_assertion format');
    throw err;
  }
}

function algIsAllowed(header: Record<string, unknown>): void {
  if (typeof header.alg !== 'string' || !(CLIENT_ASSERTION_ALGS as readonly string[]).includes(header.alg)) {
    throw new InvalidClient('client assertion must be signed with ES256');
  }
}

function typIsJwtWhenPresent(header: Record<string, unknown>): void {
  // A DPoP proof or another typed JWT must not double as a client assertion.
  if (header.typ !== undefined && header.typ !== 'JWT') throw new InvalidClient('client assertion typ must be JWT');
}

function issAndSubNameTheClient(claims: JWTPayload): string {
  if (typeof claims.sub !== 'string' || claims.sub.length === 0) throw new InvalidClient('client assertion sub must be provided');
  if (claims.iss !== claims.sub) throw new InvalidClient('client assertion iss must equal sub (the client_id)');
  return claims.sub;
}

function bodyClientIdMatches(params: Map<string, string>, clientId: string): void {
  const bodyClientId = params.get('client_id');
  if (bodyClientId !== undefined && bodyClientId !== clientId) throw new InvalidRequest('client_id does not match the client assertion');
}

async function clientIsRegistered(ctx: AppContext, settings: GuardSettings, clientId: string, input: ClientAssertionInput): Promise<ClientRecord> {
  const client = await input.clients.find(ctx, clientId, settings.pendingClientTtlSec, input.fresh);
  if (!client) throw new InvalidClient('unknown client');
  return client;
}

function signatureVerifiesWithRegisteredKey(jws: CompactJws, client: ClientRecord, keys: Es256KeyCache): void {
  // Claims are checked by the named steps below, with our clock: only the signature here.
  let verified = false;
  try {
    const jwk = client.jwks.keys[0];
    verified = es256Verifies(jws, keys.keyOf({ kty: 'EC', crv: 'P-256', x: String(jwk.x), y: String(jwk.y) }).key);
  } catch {
    verified = false;
  }
  if (!verified) throw new InvalidClient('client assertion signature does not verify with the registered key');
}

function audienceIsThisServer(claims: JWTPayload, audiences: string[]): void {
  // draft-ietf-oauth-rfc7523bis: a single string, never an array (audience injection).
  if (typeof claims.aud !== 'string' || !audiences.includes(claims.aud)) {
    throw new InvalidClient('client assertion aud must be the issuer or the token endpoint, as a single string');
  }
}

function expiryIsPresentAndNear(claims: JWTPayload, now: number, settings: GuardSettings): void {
  if (typeof claims.exp !== 'number') throw new InvalidClient('client assertion expiration must be specified');
  if (claims.exp <= now - settings.clockSkewSec) throw new InvalidClient('client assertion has expired');
  if (claims.exp > now + settings.assertionMaxLifetimeSec + settings.clockSkewSec) throw new InvalidClient('client assertion lives too long');
}

function notIssuedInTheFuture(claims: JWTPayload, now: number, settings: GuardSettings): void {
  for (const name of ['iat', 'nbf'] as const) {
    const v = claims[name];
    if (v === undefined) continue;
    if (typeof v !== 'number') throw new InvalidClient(`client assertion ${name} must be a number`);
    if (v > now + settings.clockSkewSec) throw new InvalidClient(`client assertion ${name} is in the future`);
  }
}

function jtiIsPresent(claims: JWTPayload, clientId: string, settings: GuardSettings): SingleUse {
  if (typeof claims.jti !== 'string' || claims.jti.length === 0 || claims.jti.length > 256) throw new InvalidClient('client assertion must carry a unique jti');
  return { key: stateKey('client_assertion', `${clientId}:${claims.jti}`), expiresAt: new Date(((claims.exp as number) + settings.clockSkewSec) * 1000) };
}

export function assertionReplayed(): Error {
  return new InvalidClient('client assertion tokens must only be used once');
}
