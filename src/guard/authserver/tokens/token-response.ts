import crypto from 'node:crypto';
import type { GuardDeps } from '../deps';
import { TOKEN_TYPE_ACCESS_TOKEN } from '../../../common/oauth';
import type { PolicyDecision, PolicyInput } from '../../policy';
import { issueAccessToken, type SessionClaims } from './access-token';
import { createSessionWithToken, rotateRefreshToken, type Session } from './refresh-tokens';

/** Token response plus `refresh_expires_in` (ZETA UC06). */
export interface TokenResponse {
  access_token: string;
  token_type: 'DPoP';
  expires_in: number;
  scope: string;
  refresh_token: string;
  refresh_expires_in: number;
  issued_token_type: typeof TOKEN_TYPE_ACCESS_TOKEN;
  /** After a hardware attestation (docs/requirements.md, Hardware attestation). */
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
  input: { clientId: string; jkt: string; claims: SessionClaims; policyInput: PolicyInput; decision: PolicyDecision; sid?: string; attestedPlatform?: string },
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
  // One statement: the session, its refresh token and the client's attested state (one commit).
  const rt = await createSessionWithToken(deps.ctx, session, refreshTtl, input.attestedPlatform);
  deps.families.remember(session, rt);
  return tokenResponse(deps, session, input.decision, session.claims.scope, rt);
}

/**
 * Refresh: the presented token rotated to a new one, then a new access token. Undefined when a
 * racing refresh used the presented token first (the caller treats it as reuse).
 */
export async function rotatedTokens(deps: GuardDeps, presentedHash: string, session: Session, decision: PolicyDecision, scope: string): Promise<TokenResponse | undefined> {
  const rt = await rotateRefreshToken(deps.ctx, presentedHash, session, ttlsOf(deps, decision).refreshTtl);
  if (!rt) return undefined;
  deps.families.remember(session, rt);
  return tokenResponse(deps, session, decision, scope, rt);
}

async function tokenResponse(deps: GuardDeps, session: Session, decision: PolicyDecision, scope: string, rt: { token: string; expiresAt: Date }): Promise<TokenResponse> {
  const now = deps.ctx.now();
  const { accessTtl } = ttlsOf(deps, decision);
  const claims = { ...session.claims, scope };
  const at = await issueAccessToken(deps.keys, deps.settings, now, { claims, sid: session.sid, jkt: session.jkt, ttlSec: accessTtl });
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
