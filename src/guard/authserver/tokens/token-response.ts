import crypto from 'node:crypto';
import type { GuardDeps } from '../deps';
import { TOKEN_TYPE_ACCESS_TOKEN } from '../../../protocol/oauth';
import type { PolicyDecision, PolicyInput } from '../../policy';
import { issueAccessToken, type SessionClaims } from './access-token';
import { createSession, issueRefreshToken, type Session } from './refresh-tokens';

/** Token response plus `refresh_expires_in` (ZETA UC06). */
export interface TokenResponse {
  access_token: string;
  token_type: 'DPoP';
  expires_in: number;
  scope: string;
  refresh_token: string;
  refresh_expires_in: number;
  issued_token_type: typeof TOKEN_TYPE_ACCESS_TOKEN;
  /** After a hardware attestation (CONTRACT 8). */
  svc_att_token?: string;
}

function ttlsOf(deps: GuardDeps, decision: PolicyDecision): { accessTtl: number; refreshTtl: number } {
  return {
    accessTtl: decision.ttl?.access_token ?? deps.settings.accessTokenTtlSec,
    refreshTtl: decision.ttl?.refresh_token ?? deps.settings.refreshTokenTtlSec,
  };
}

/** A new session (refresh-token family) capped at the first refresh token's lifetime (gemSpec A_25649). */
export async function startSession(
  deps: GuardDeps,
  input: { clientId: string; jkt: string; claims: SessionClaims; policyInput: PolicyInput; decision: PolicyDecision; sid?: string },
): Promise<TokenResponse> {
  const now = deps.ctx.now();
  const { refreshTtl } = ttlsOf(deps, input.decision);
  const session: Session = {
    sid: input.sid ?? crypto.randomUUID(),
    clientId: input.clientId,
    jkt: input.jkt,
    claims: input.claims,
    policyInput: input.policyInput,
    createdAt: now,
    expiresAt: new Date(now.getTime() + refreshTtl * 1000),
  };
  await createSession(deps.ctx, session);
  return tokensForSession(deps, session, input.decision);
}

export async function tokensForSession(deps: GuardDeps, session: Session, decision: PolicyDecision, scope = session.claims.scope): Promise<TokenResponse> {
  const now = deps.ctx.now();
  const { accessTtl, refreshTtl } = ttlsOf(deps, decision);
  const claims = { ...session.claims, scope };
  const at = await issueAccessToken(deps.keys, deps.settings, now, { claims, sid: session.sid, jkt: session.jkt, ttlSec: accessTtl });
  const rt = await issueRefreshToken(deps.ctx, session, refreshTtl);
  return {
    access_token: at.token,
    token_type: 'DPoP',
    expires_in: accessTtl,
    scope,
    refresh_token: rt.token,
    refresh_expires_in: Math.max(0, Math.round((rt.expiresAt.getTime() - now.getTime()) / 1000)),
    issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
  };
}
