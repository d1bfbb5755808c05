import { limitFor, rateLimitResult, type RateLimitResult, type RateLimitRule } from '../state/rate-limit';
import { stateKey, type SharedState } from '../state/shared-state';

export interface LedgerEntry {
  /** The proof's replay key (`<jkt>:<jti>`), single use until `seenUntil`. */
  proof: string;
  seenUntil: Date;
  /** Rate-limit bucket of the client (`fhir:client:<hash>`). */
  bucket: string;
  rule: RateLimitRule;
}

export interface LedgerResult {
  /** The proof had not been seen (RFC 9449 §11.1). */
  fresh: boolean;
  rate: RateLimitResult;
}

/**
 * The two pieces of shared state a resource request touches, the DPoP jti and the per-client
 * counter, written in one round trip with the key scheme of every other replay cache.
 */
export async function recordRequest(state: SharedState, now: Date, e: LedgerEntry): Promise<LedgerResult> {
  const limit = limitFor(e.bucket, e.rule, now);
  const { first, count } = await state.firstUsesAndCount([{ key: stateKey('dpop', e.proof), expiresAt: e.seenUntil }], now, limit.bucket, limit.window);
  return { fresh: first[0], rate: rateLimitResult(limit, count, now) };
}
