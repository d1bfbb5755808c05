import crypto from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from 'jose';
import type { WorkloadIssuer } from '../../../config';
import { scopeCovered } from '../../../common/smart-scopes';
import { GRANT_TOKEN_EXCHANGE, TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_ID_TOKEN, TOKEN_TYPE_JWT } from '../../../common/oauth';
import type { VerifiedDpopProof } from '../../dpop/verify-dpop-proof';
import { AccessDenied, InvalidRequest, InvalidScope, InvalidTarget, RateLimitExceeded, TemporarilyUnavailable } from '../../errors';
import type { WorkloadPolicyInput } from '../../policy';
import { consumeOnce } from '../../state/replay-cache';
import { hitRateLimit, rateLimitHeaders } from '../../state/rate-limit';
import type { GuardDeps } from '../deps';
import { policyAllows } from '../policy-gate';
import { authorizationRequest } from './attested-client';
import { issueAccessToken, type SessionClaims } from '../tokens/access-token';
import { createSession } from '../tokens/refresh-tokens';
import { subjectAllowed, WorkloadIssuerUnreachable } from '../workload/workload-issuers';
import { defineGrant, type GrantForm } from './grant';

const ALGORITHMS = ['ES256', 'RS256'];
/** docs/requirements.md, Workload token exchange: `exp`, `nbf` and `iat` with 60 s of clock skew. */
const SKEW_SEC = 60;

/** The answer of a workload exchange: an access token only, never a refresh token. */
export interface WorkloadTokenResponse {
  access_token: string;
  issued_token_type: typeof TOKEN_TYPE_ACCESS_TOKEN;
  token_type: 'DPoP';
  expires_in: number;
  scope: string;
}

/**
 * A workload's token exchange: no client authentication, a nonce optional. It takes the token
 * exchanges that carry no client authentication and a subject token of a trusted workload issuer,
 * or at least not an institution card's (those carry the card certificate in `x5c`); a client
 * that forgot its assertion still gets 401 invalid_client from the client's token exchange.
 */
export const workloadExchangeGrant = defineGrant({
  type: GRANT_TOKEN_EXCHANGE,
  parameters: ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope'],
  nonce: 'optional',
  clientAuthentication: 'none',
  takes: isWorkloadExchange,
  handle: workloadExchange,
});

function isWorkloadExchange(deps: GuardDeps, form: GrantForm): boolean {
  const { params } = form;
  if (params.has('client_assertion') || params.has('client_assertion_type') || form.authorization !== undefined) return false;
  const token = params.get('subject_token') ?? '';
  try {
    return deps.workloadIssuers.find(decodeJwt(token).iss) !== undefined || !('x5c' in decodeProtectedHeader(token));
  } catch {
    // Not a JWS at all: the workload path answers it (400 invalid_request).
    return true;
  }
}

/**
 * Workload token exchange (ZETA service-to-service; docs/requirements.md, Workload token exchange): a service
 * presents a JWT from an issuer of WORKLOAD_ISSUERS_FILE instead of a registered client and an
 * institution card. In order, each failure with its stable description token: parameters (400),
 * trusted issuer, signature (ES256/RS256, keys from the issuer), audience, times, subject, `jti`
 * single use across replicas, then scopes and policy; the access token is bound to the DPoP key
 * of the request (this guard issues no bearer tokens: every /fhir request needs DPoP).
 */
async function workloadExchange(deps: GuardDeps, r: { params: Map<string, string>; proof: VerifiedDpopProof; ip: string }): Promise<WorkloadTokenResponse> {
  const token = parametersArePresent(r.params, deps);
  const issuer = issuerIsTrusted(deps, token);
  const claims = await signatureAndClaimsVerify(deps, issuer, token);
  const sub = claims.sub as string;
  if (!subjectAllowed(issuer, sub)) throw new AccessDenied(`subject_not_allowed: ${issuer.issuer} may not exchange tokens for subject ${JSON.stringify(sub)}`);
  const now = deps.ctx.now();
  // Until the token could no longer pass the time checks.
  const usableUntil = new Date(((claims.exp as number) + SKEW_SEC) * 1000);
  if (!(await consumeOnce(deps.state, 'workload-jti', `${issuer.issuer}|${claims.jti as string}`, usableUntil, now))) {
    throw new AccessDenied('replayed: this workload token (its jti) was exchanged before');
  }
  const clientId = `${issuer.issuer}#${sub}`;
  const limit = await hitRateLimit(deps.state, `client:${clientId}`, deps.settings.rateLimit.perClient, now);
  if (!limit.allowed) throw new RateLimitExceeded('too many requests for this workload', { headers: rateLimitHeaders(limit) });
  const scopes = scopesWithin(r.params, issuer);
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud as string];
  const input: WorkloadPolicyInput = {
    version: '1.1',
    workload: { iss: issuer.issuer, sub, aud },
    authorization_request: authorizationRequest(deps, scopes, GRANT_TOKEN_EXCHANGE, r.ip),
  };
  const decision = await policyAllows(deps, input, 'policy_denied');
  const ttlSec = decision.ttl?.access_token ?? deps.settings.accessTokenTtlSec;
  const sessionClaims: SessionClaims = {
    sub,
    client_id: clientId,
    scope: scopes.join(' '),
    profession_oid: '',
    common_name: sub,
    product_id: 'workload',
    product_version: '',
    platform: 'workload',
  };
  // A session of its own (no refresh token), because the enforcement point checks every access
  // token's session. The token is short-lived; a workload has no client assertion to revoke it with.
  const sid = crypto.randomUUID();
  await createSession(deps.ctx, { sid, clientId, jkt: r.proof.jkt, claims: sessionClaims, policyInput: input, createdAt: now, expiresAt: new Date(now.getTime() + ttlSec * 1000), workload: true });
  const at = await issueAccessToken(deps.keys, deps.settings, now, { claims: sessionClaims, sid, jkt: r.proof.jkt, ttlSec });
  return { access_token: at.token, issued_token_type: TOKEN_TYPE_ACCESS_TOKEN, token_type: 'DPoP', expires_in: ttlSec, scope: sessionClaims.scope };
}

function parametersArePresent(params: Map<string, string>, deps: GuardDeps): string {
  const token = params.get('subject_token');
  if (!token) throw new InvalidRequest('subject_token is required');
  const type = params.get('subject_token_type');
  if (type !== TOKEN_TYPE_JWT && type !== TOKEN_TYPE_ID_TOKEN) throw new InvalidRequest(`subject_token_type must be ${TOKEN_TYPE_JWT} or ${TOKEN_TYPE_ID_TOKEN}`);
  const requested = params.get('requested_token_type');
  if (requested !== undefined && requested !== TOKEN_TYPE_ACCESS_TOKEN) throw new InvalidRequest(`requested_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN}`);
  const resource = params.get('resource') ?? params.get('audience');
  if (resource !== undefined && resource !== deps.settings.resource) throw new InvalidTarget('resource is not served by this authorization server');
  return token;
}

function issuerIsTrusted(deps: GuardDeps, token: string): WorkloadIssuer {
  let iss: unknown;
  try {
    decodeProtectedHeader(token);
    iss = decodeJwt(token).iss;
  } catch {
    throw new InvalidRequest('subject_token is not a JWT');
  }
  const issuer = deps.workloadIssuers.find(iss);
  if (!issuer) throw new AccessDenied(`untrusted_issuer: ${typeof iss === 'string' ? JSON.stringify(iss) : 'a token without iss'} is not a trusted workload issuer`);
  return issuer;
}

async function signatureAndClaimsVerify(deps: GuardDeps, issuer: WorkloadIssuer, token: string): Promise<JWTPayload> {
  const alg = decodeProtectedHeader(token).alg;
  if (typeof alg !== 'string' || !ALGORITHMS.includes(alg)) throw new AccessDenied(`invalid_signature: alg ${String(alg)} is not accepted (${ALGORITHMS.join(', ')})`);
  let keys;
  try {
    keys = await deps.workloadIssuers.keysOf(issuer);
  } catch (err) {
    if (err instanceof WorkloadIssuerUnreachable) throw new TemporarilyUnavailable(err.message);
    throw err;
  }
  const audiences = issuer.audiences.length ? issuer.audiences : [deps.settings.issuer, deps.urls.token];
  try {
    const { payload } = await jwtVerify(token, keys, {
      algorithms: ALGORITHMS,
      audience: audiences,
      clockTolerance: SKEW_SEC,
      maxTokenAge: issuer.maxTokenAgeSec,
      requiredClaims: ['exp', 'iat', 'sub', 'jti'],
      currentDate: deps.ctx.now(),
    });
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || typeof payload.jti !== 'string' || payload.jti.length === 0 || payload.jti.length > 256) {
      throw new InvalidRequest('the workload token needs a sub and a jti');
    }
    return payload;
  } catch (err) {
    throw verificationError(err, audiences);
  }
}

/** jose's reasons as this guard's stable tokens. */
function verificationError(err: unknown, audiences: string[]): Error {
  if (err instanceof InvalidRequest) return err;
  if (err instanceof errors.JWTExpired) return new AccessDenied(`expired: the workload token ${err.claim === 'iat' ? 'is older than max_token_age' : 'has expired'}`);
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return new InvalidRequest(`the workload token has no ${err.claim} claim`);
    if (err.claim === 'aud') return new AccessDenied(`invalid_audience: the workload token is not for ${audiences.join(' or ')}`);
    if (err.claim === 'nbf' || err.claim === 'iat') return new AccessDenied(`expired: the workload token is not valid yet (${err.claim})`);
    return new InvalidRequest(`the workload token's ${err.claim} claim is invalid`);
  }
  if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid) return new TemporarilyUnavailable('the workload issuer\'s keys could not be fetched; retry later');
  if (err instanceof errors.JOSEError) return new AccessDenied(`invalid_signature: ${err instanceof errors.JWKSNoMatchingKey ? 'no key of the issuer matches the token' : 'the signature does not verify'}`);
  if (err instanceof TypeError || (err as { name?: string }).name === 'AbortError') return new TemporarilyUnavailable('the workload issuer\'s keys could not be fetched; retry later');
  return err as Error;
}

/** `scope`, space-separated: each covered by the issuer's scopes; none asked: all of them. */
function scopesWithin(params: Map<string, string>, issuer: WorkloadIssuer): string[] {
  const asked = (params.get('scope') ?? '').split(' ').filter(Boolean);
  if (asked.length === 0) return [...issuer.scopes];
  const outside = asked.filter((s) => !scopeCovered(s, issuer.scopes));
  if (outside.length) throw new InvalidScope(`not granted to workloads of ${issuer.issuer}: ${outside.join(' ')}`);
  return asked;
}
