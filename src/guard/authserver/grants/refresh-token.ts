import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import { InvalidGrant, InvalidRequest, InvalidScope, InvalidTarget, UnauthorizedClient } from '../../errors';
import type { AuthenticatedClient } from '../client-auth/verify-client-assertion';
import type { GuardDeps } from '../deps';
import { GRANT_REFRESH_TOKEN } from '../../../common/oauth';
import { policyAllows } from '../policy-gate';
import { isWorkloadInput } from '../../policy';
import { findRefreshToken, refreshTokenHash, revokeSession, type RefreshTokenRecord } from '../tokens/refresh-tokens';
import { rotatedTokens, type TokenResponse } from '../tokens/token-response';
import { defineGrant } from './grant';

export interface RefreshRequest {
  params: Map<string, string>;
  proof: VerifiedDpopProof;
  auth: AuthenticatedClient;
  ip: string;
}

/** RFC 6749 §6: a session goes on with a rotated refresh token; the proof's nonce is optional (ZETA refresh flow). */
export const refreshTokenGrant = defineGrant({
  type: GRANT_REFRESH_TOKEN,
  parameters: ['refresh_token', 'resource', 'audience', 'scope'],
  nonce: 'optional',
  clientAuthentication: 'cached',
  handle: refreshGrant,
});

/**
 * Refresh: no attestation, the same DPoP key as the family,
 * the policy asked again, then rotation. A used or revoked token kills the family: 400 invalid_grant.
 */
async function refreshGrant(deps: GuardDeps, r: RefreshRequest): Promise<TokenResponse> {
  const { ctx } = deps;
  const value = parametersArePresent(r);
  clientMayUseGrant(r.auth.client.grantTypes);
  // A token this process issued needs no read (RefreshFamilies); the rotation checks use and revocation.
  const known = deps.families.take(refreshTokenHash(value));
  const rt = known ?? (await tokenIsKnown(deps, value));
  tokenBelongsToClient(rt, r.auth.client.clientId);
  resourceIsTheSessionResource(r.params, rt);
  familyIsAlive(rt);
  await tokenIsUnused(deps, rt);
  tokenIsUnexpired(rt, ctx.now());
  dpopKeyIsTheFamilyKey(rt, r.proof);
  const scope = scopeIsWithinSession(r.params, rt.session.claims.scope);
  const previous = rt.session.policyInput;
  // Workload sessions are issued no refresh token; a token naming one is not ours to honour.
  if (isWorkloadInput(previous)) throw new InvalidGrant('the refresh token is invalid');
  const decision = await policyAllows(deps, {
    ...previous,
    authorization_request: {
      ...previous.authorization_request,
      scopes: scope.split(' '),
      grant_type: GRANT_REFRESH_TOKEN,
      ip_address: r.ip,
      previous_ip_address: previous.authorization_request.ip_address,
    },
  });
  // Rotation: exactly one of two racing refreshes consumes the token; the other is a reuse.
  const tokens = await rotatedTokens(deps, rt.tokenHash, rt.session, decision, scope);
  if (tokens) return tokens;
  if (known) {
    // Not rotated: the store says why (revoked; used before, a reuse that ends the family).
    const stored = await tokenIsKnown(deps, value);
    familyIsAlive(stored);
    await tokenIsUnused(deps, stored);
  }
  await revokeSession(ctx, deps.sessions, rt.session.sid, 'refresh token reused');
  throw new InvalidGrant(REFRESH_TOKEN_REUSED);
}

function parametersArePresent(r: RefreshRequest): string {
  const value = r.params.get('refresh_token');
  if (!value) throw new InvalidRequest('refresh_token is required');
  if (r.auth.claims.client_statement !== undefined) throw new InvalidRequest('a refresh carries no client_statement');
  return value;
}

function clientMayUseGrant(grantTypes: string[]): void {
  if (!grantTypes.includes(GRANT_REFRESH_TOKEN)) throw new UnauthorizedClient('this client is not registered for refresh_token');
}

async function tokenIsKnown(deps: GuardDeps, value: string): Promise<RefreshTokenRecord> {
  const rt = await findRefreshToken(deps.ctx, value);
  if (!rt) throw new InvalidGrant('unknown refresh token');
  const resource = rt.session.policyInput.authorization_request.resource;
  if (resource !== deps.settings.resource) throw new InvalidTarget('refresh token was issued for another resource');
  return rt;
}

function tokenBelongsToClient(rt: RefreshTokenRecord, clientId: string): void {
  if (rt.session.clientId !== clientId) throw new InvalidGrant('refresh token was issued to another client');
}

function familyIsAlive(rt: RefreshTokenRecord): void {
  if (rt.session.revokedAt) throw new InvalidGrant('refresh token has been revoked');
}

function resourceIsTheSessionResource(params: Map<string, string>, rt: RefreshTokenRecord): void {
  const resource = params.get('resource') ?? params.get('audience');
  if (resource !== undefined && resource !== rt.session.policyInput.authorization_request.resource) {
    throw new InvalidTarget('resource differs from the resource of the session');
  }
}

/** The description of a refused reuse (RFC 9700 §4.14.2): the audit trail records it as a security event of its own. */
export const REFRESH_TOKEN_REUSED = 'refresh token already used; the session has been revoked';

async function tokenIsUnused(deps: GuardDeps, rt: RefreshTokenRecord): Promise<void> {
  if (rt.consumedAt) {
    // RFC 9700 §4.14.2: the AS cannot tell the attacker from the client, so the family dies.
    await revokeSession(deps.ctx, deps.sessions, rt.session.sid, 'refresh token reused');
    throw new InvalidGrant(REFRESH_TOKEN_REUSED);
  }
}

function tokenIsUnexpired(rt: RefreshTokenRecord, now: Date): void {
  if (rt.expiresAt <= now || rt.session.expiresAt <= now) throw new InvalidGrant('refresh token has expired');
}

function dpopKeyIsTheFamilyKey(rt: RefreshTokenRecord, proof: VerifiedDpopProof): void {
  if (rt.session.jkt !== proof.jkt) throw new InvalidGrant('refresh token is bound to another DPoP key');
}

function scopeIsWithinSession(params: Map<string, string>, sessionScope: string): string {
  const raw = params.get('scope');
  if (raw === undefined || raw.trim() === '') return sessionScope;
  const granted = new Set(sessionScope.split(' '));
  const asked = [...new Set(raw.split(' ').filter(Boolean))];
  // RFC 6749 §6: a refresh may narrow the scope, never widen it.
  if (!asked.every((s) => granted.has(s))) throw new InvalidScope('scope exceeds the scope of the session');
  return asked.join(' ');
}
