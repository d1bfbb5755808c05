import type { Es256KeyCache } from '../jose/es256';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';
import { verifyDpopProof, type VerifiedDpopProof } from '../dpop/verify-dpop-proof';
import { InvalidDpopProof, InvalidToken } from '../errors';
import type { PepSettings } from './settings';

export interface ProvedRequest {
  /** `req.headersDistinct.dpop`: Node joins repeated headers in `req.headers`. */
  dpop: string[] | undefined;
  method: string;
  /** Path and query as received (`req.originalUrl`); htu is `PUBLIC_URL` + its path. */
  originalUrl: string;
}

/**
 * The proof that accompanies an access token (RFC 9449 §4.3 steps 1-9, 11 time window and 12
 * `ath` in verifyDpopProof, errors as 401), then the binding of step 12: the proof key is the
 * key named by the token's `cnf.jkt` (else `invalid_token`).
 */
export async function verifyRequestProof(
  settings: PepSettings,
  now: Date,
  req: ProvedRequest,
  accessToken: string,
  token: AccessTokenPayload,
  keys?: Es256KeyCache,
): Promise<VerifiedDpopProof> {
  const proof = await verifyDpopProof({
    headerValues: req.dpop,
    method: req.method,
    url: `${settings.publicUrl}${req.originalUrl.split(/[?#]/)[0]}`,
    now,
    maxAgeSec: settings.dpopValiditySec + settings.leewaySec,
    skewSec: settings.leewaySec,
    accessToken,
    errorStatus: 401,
    keyOf: keys?.keyOf,
  });
  proofKeyIsTheBoundKey(proof, token);
  return proof;
}

function proofKeyIsTheBoundKey(proof: VerifiedDpopProof, token: AccessTokenPayload): void {
  if (proof.jkt !== token.cnf.jkt) throw new InvalidToken('the DPoP proof is signed with another key than the access token is bound to');
}

/** RFC 9449 §11.1 : each proof once within its validity, across replicas; `fresh` comes from request-ledger.ts. */
export function proofIsFresh(fresh: boolean): void {
  if (!fresh) throw new InvalidDpopProof('DPoP proof jti has been used before', { status: 401 });
}

/** How long a proof's jti is remembered: as long as the proof could be accepted, plus a minute (as checkDpopReplay). */
export function replayWindowEnd(settings: PepSettings, proof: VerifiedDpopProof): Date {
  return new Date((proof.iat + settings.dpopValiditySec + settings.leewaySec + 60) * 1000);
}
