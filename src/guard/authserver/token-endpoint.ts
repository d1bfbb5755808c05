import { decodeJwt, decodeProtectedHeader } from 'jose';
import { checkDpopReplay, dpopProofReplayed, dpopProofUse, verifyDpopProof, type VerifiedDpopProof } from '../dpop/verify-dpop-proof';
import { InvalidRequest, RateLimitExceeded, UnsupportedGrantType, UseDpopNonce } from '../errors';
import { parseForm } from '../http/form';
import { consumeNonce, issueNonce, nonceKey } from '../state/nonce-store';
import { limitFor, rateLimitHeaders, rateLimitResult } from '../state/rate-limit';
import { assertionReplayed, verifyClientAssertion, type AuthenticatedClient } from './client-auth/verify-client-assertion';
import type { GuardDeps } from './deps';
import { GRANT_AUTHORIZATION_CODE, GRANT_REFRESH_TOKEN, GRANT_TOKEN_EXCHANGE } from '../../protocol/oauth';
import { authorizationCodeGrant } from './grants/authorization-code';
import { refreshGrant } from './grants/refresh-token';
import { tokenExchange } from './grants/token-exchange';
import { workloadExchange, type WorkloadTokenResponse } from './grants/workload-exchange';
import type { TokenResponse } from './tokens/token-response';

/** The parts of an HTTP request the token and revocation endpoints look at (no Express in here). */
export interface EndpointRequest {
  isForm: boolean;
  body: string;
  dpop: string[] | undefined;
  authorization?: string | readonly string[];
  ip: string;
}

/**
 * POST /token: form parameters, then the DPoP proof (with a fresh
 * nonce for token exchange), then client authentication, then the grant.
 */
export async function tokenEndpoint(deps: GuardDeps, req: EndpointRequest): Promise<TokenResponse | WorkloadTokenResponse> {
  const params = formParameters(req);
  const grantType = grantTypeIsSupported(params);
  const refresh = grantType === GRANT_REFRESH_TOKEN;
  // Each proof's jti is recorded in the round trip of another check: a refresh's with the client's
  // assertion jti and counter, the others' with their nonce.
  const proof = await dpopProofIsValid(deps, req, deps.urls.token);
  if (grantType === GRANT_TOKEN_EXCHANGE && isWorkloadExchange(deps, params, req)) {
    // A service, not a registered client (CONTRACT 11): no client assertion; a nonce is optional.
    await proofIsFreshWithNonce(deps, proof, false);
    return workloadExchange(deps, { params, proof, ip: req.ip });
  }
  // Grants that start a session bind the client's posture to a fresh nonce; a refresh need not.
  const nonce = refresh ? await dpopNonceIsFresh(deps, proof, false) : await proofIsFreshWithNonce(deps, proof, true);
  // A refresh reads only the client's id, key and grant types: a cached active client will do.
  const auth = await authenticateClient(deps, params, req, { fresh: !refresh, proof: refresh ? proof : undefined });
  if (grantType === GRANT_TOKEN_EXCHANGE) return tokenExchange(deps, { params, proof, nonce: nonce!, auth, ip: req.ip });
  if (grantType === GRANT_AUTHORIZATION_CODE) return authorizationCodeGrant(deps, { params, proof, nonce: nonce!, auth, ip: req.ip });
  return refreshGrant(deps, { params, proof, auth, ip: req.ip });
}

/**
 * A workload's exchange (CONTRACT 11): no client authentication, and a subject token from a
 * trusted workload issuer or at least not an institution card's (those carry the card
 * certificate in `x5c`). A client that forgot its assertion still gets 401 invalid_client.
 */
function isWorkloadExchange(deps: GuardDeps, params: Map<string, string>, req: EndpointRequest): boolean {
  if (params.has('client_assertion') || params.has('client_assertion_type') || req.authorization !== undefined) return false;
  const token = params.get('subject_token') ?? '';
  try {
    return deps.workloadIssuers.find(decodeJwt(token).iss) !== undefined || !('x5c' in decodeProtectedHeader(token));
  } catch {
    // Not a JWS at all: the workload path answers it (400 invalid_request).
    return true;
  }
}

export function formParameters(req: EndpointRequest): Map<string, string> {
  if (!req.isForm) throw new InvalidRequest('the request must be application/x-www-form-urlencoded');
  return parseForm(req.body);
}

function grantTypeIsSupported(params: Map<string, string>): string {
  const grantType = params.get('grant_type');
  if (!grantType) throw new InvalidRequest('grant_type is required');
  if (grantType !== GRANT_TOKEN_EXCHANGE && grantType !== GRANT_REFRESH_TOKEN && grantType !== GRANT_AUTHORIZATION_CODE) throw new UnsupportedGrantType('grant_type is not supported');
  return grantType;
}

/**
 * RFC 9449 §4.3 on the token endpoint: 400 `invalid_dpop_proof` (§5). The jti is replay-checked
 * by the caller in the round trip of another check: `authenticateClient` with the client's own
 * single-use values, or `proofIsFreshWithNonce` with the nonce.
 */
export async function dpopProofIsValid(deps: GuardDeps, req: EndpointRequest, url: string): Promise<VerifiedDpopProof> {
  const proof = await verifyDpopProof({
    headerValues: req.dpop,
    method: 'POST',
    url,
    now: deps.ctx.now(),
    maxAgeSec: deps.settings.dpopMaxAgeSec,
    skewSec: deps.settings.clockSkewSec,
    keyOf: deps.es256Keys.keyOf,
  });
  return proof;
}

/**
 * RFC 9449 §8: the proof's `nonce` must be a fresh value from GET /nonce, consumed here (single
 * use across replicas). Missing or stale: 400 `use_dpop_nonce` with a new nonce in `DPoP-Nonce`.
 * Refresh proofs may omit it (ZETA refresh flow), but one that is sent must be valid.
 */
async function dpopNonceIsFresh(deps: GuardDeps, proof: VerifiedDpopProof, required: boolean): Promise<string | undefined> {
  if (proof.nonce === undefined && !required) return undefined;
  if (proof.nonce !== undefined && (await consumeNonce(deps.state, proof.nonce, deps.ctx.now()))) return proof.nonce;
  throw await nonceChallenge(deps, proof);
}

/**
 * The replay check of the proof's jti (RFC 9449 §11.1) and its nonce (§8, as `dpopNonceIsFresh`)
 * in one round trip to the shared state; a replayed proof is refused as such before its nonce.
 */
async function proofIsFreshWithNonce(deps: GuardDeps, proof: VerifiedDpopProof, required: boolean): Promise<string | undefined> {
  const now = deps.ctx.now();
  const key = proof.nonce === undefined ? undefined : nonceKey(proof.nonce);
  if (key === undefined) {
    await checkDpopReplay(deps.state, now, proof, deps.settings.dpopMaxAgeSec);
    return dpopNonceIsFresh(deps, proof, required);
  }
  const { first, taken } = await deps.state.firstUseAndTake(dpopProofUse(proof, deps.settings.dpopMaxAgeSec), key, now);
  if (!first) throw dpopProofReplayed();
  if (taken) return proof.nonce;
  throw await nonceChallenge(deps, proof);
}

/** 400 `use_dpop_nonce` with a new nonce in `DPoP-Nonce`. */
async function nonceChallenge(deps: GuardDeps, proof: VerifiedDpopProof): Promise<Error> {
  const fresh = await issueNonce(deps.state, deps.ctx.now(), deps.settings.nonceTtlSec);
  return new UseDpopNonce(proof.nonce === undefined ? 'the DPoP proof must carry a nonce from the nonce endpoint' : 'the DPoP proof nonce is unknown, used or expired', {
    headers: { 'DPoP-Nonce': fresh.nonce },
  });
}

/**
 * private_key_jwt (`aud`: the issuer or the endpoint called), then in one round trip to the shared
 * state the assertion's jti, the DPoP proof's jti when given (not yet replay-checked), and the
 * per-client rate limit; refused in that order of precedence: replayed proof, replayed
 * assertion, limit.
 */
export async function authenticateClient(
  deps: GuardDeps,
  params: Map<string, string>,
  req: EndpointRequest,
  opts: { audiences?: string[]; fresh?: boolean; proof?: VerifiedDpopProof } = {},
): Promise<AuthenticatedClient> {
  const auth = await verifyClientAssertion(deps.ctx, deps.settings, {
    params,
    authorization: req.authorization,
    audiences: opts.audiences ?? [deps.settings.issuer, deps.urls.token],
    clients: deps.clients,
    fresh: opts.fresh ?? true,
    keys: deps.es256Keys,
  });
  const now = deps.ctx.now();
  const limit = limitFor(`client:${auth.client.clientId}`, deps.settings.rateLimit.perClient, now);
  const uses = opts.proof ? [auth.assertionUse, dpopProofUse(opts.proof, deps.settings.dpopMaxAgeSec)] : [auth.assertionUse];
  const { first, count } = await deps.state.firstUsesAndCount(uses, now, limit.bucket, limit.window);
  if (opts.proof && !first[1]) throw dpopProofReplayed();
  if (!first[0]) throw assertionReplayed();
  const rate = rateLimitResult(limit, count, now);
  if (!rate.allowed) throw new RateLimitExceeded('too many requests for this client', { headers: rateLimitHeaders(rate) });
  return auth;
}
