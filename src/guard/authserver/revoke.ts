import { InvalidRequest } from '../errors';
import type { GuardDeps } from './deps';
import { authenticateClient, dpopProofIsValid, formParameters, type EndpointRequest } from './token-endpoint';
import { findRefreshToken, findSession, revokeSession } from './tokens/refresh-tokens';

/**
 * POST /revoke (RFC 7009, ZETA Token-Revocation): DPoP proof and client assertion as at /token;
 * then always 200. A refresh token, or an access token of ours, revokes its whole session, but
 * only when it belongs to the authenticated client and the proof is signed with the family's DPoP
 * key (a stolen token plus some other key must not be able to end the holder's session).
 */
export async function revokeEndpoint(deps: GuardDeps, req: EndpointRequest): Promise<void> {
  const params = formParameters(req);
  const token = params.get('token');
  if (!token) throw new InvalidRequest('token is required');
  const proof = await dpopProofIsValid(deps, req, deps.urls.revoke);
  const { client } = await authenticateClient(deps, params, req, { proof });
  const hint = params.get('token_type_hint');
  const sid = hint === 'access_token' ? await accessTokenSid(deps, token) ?? (await refreshTokenSid(deps, token)) : (await refreshTokenSid(deps, token)) ?? (await accessTokenSid(deps, token));
  if (!sid) return;
  const session = await findSession(deps.ctx, sid);
  if (session?.clientId === client.clientId && session.jkt === proof.jkt) await revokeSession(deps.ctx, deps.sessions, sid, 'revoked by the client');
}

async function refreshTokenSid(deps: GuardDeps, token: string): Promise<string | undefined> {
  return (await findRefreshToken(deps.ctx, token))?.session.sid;
}

async function accessTokenSid(deps: GuardDeps, token: string): Promise<string | undefined> {
  try {
    return (await deps.accessTokens.verify(token)).sid;
  } catch {
    return undefined;
  }
}
