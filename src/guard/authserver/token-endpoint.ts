import { checkDpopReplay, dpopProofReplayed, dpopProofUse, verifyDpopProof, type VerifiedDpopProof } from '../dpop/verify-dpop-proof';
import { InvalidRequest, RateLimitExceeded, UnsupportedGrantType, UseDpopNonce } from '../errors';
import { parseForm } from '../http/form';
import { consumeNonce, issueNonce, nonceKey } from '../state/nonce-store';
import { limitFor, rateLimitHeaders, rateLimitResult } from '../state/rate-limit';
import { assertionReplayed, verifyClientAssertion, type AuthenticatedClient } from './client-auth/verify-client-assertion';
import type { GuardDeps } from './deps';
import type { Grant, TokenAnswer } from './grants';

/** The parts of an HTTP request the token and revocation endpoints look at (no Express in here). */
export interface EndpointRequest {
  isForm: boolean;
  body: string;
  dpop: string[] | undefined;
  authorization?: string | readonly string[];
  ip: string;
}

/**
 * POST /token: form parameters and the grant's entry (grants/), then the DPoP proof with the
 * nonce the grant needs, then the client authentication it needs, then its handler with the
 * parameters it declares.
 */
export async function tokenEndpoint(deps: GuardDeps, req: EndpointRequest): Promise<TokenAnswer> {
  const params = formParameters(req);
  const grant = grantIsSupported(deps, params, req);
  const proof = await dpopProofIsValid(deps, req, deps.urls.token);
  // Each proof's jti is recorded in the round trip of another check: with the nonce when the grant
  // needs one or authenticates no client, else with the client's assertion jti and counter.
  const jtiWithNonce = grant.nonce === 'required' || grant.clientAuthentication === 'none';
  const nonce = jtiWithNonce ? await proofIsFreshWithNonce(deps, proof, grant.nonce === 'required') : await dpopNonceIsFresh(deps, proof, false);
  const auth =
    grant.clientAuthentication === 'none'
      ? undefined
      : await authenticateClient(deps, params, req, { fresh: grant.clientAuthentication === 'fresh', proof: jtiWithNonce ? undefined : proof });
  const declared = new Map([...params].filter(([name]) => grant.parameters.includes(name)));
  return grant.handle(deps, { params: declared, proof, nonce, auth, ip: req.ip });
}

export function formParameters(req: EndpointRequest): Map<string, string> {
  if (!req.isForm) throw new InvalidRequest('the request must be application/x-www-form-urlencoded');
  return parseForm(req.body);
}

function grantIsSupported(deps: GuardDeps, params: Map<string, string>, req: EndpointRequest): Grant {
  const grantType = params.get('grant_type');
  if (!grantType) throw new InvalidRequest('grant_type is required');
  const grant = deps.grants.find(deps, grantType, { params, authorization: req.authorization });
  if (!grant) throw new UnsupportedGrantType('grant_type is not supported');
  return grant;
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
