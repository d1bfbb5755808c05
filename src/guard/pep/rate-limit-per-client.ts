import crypto from 'node:crypto';
import { RateLimitExceeded } from '../errors';
import { rateLimitHeaders, type RateLimitResult } from '../state/rate-limit';

/** The rate-limit bucket of a client: a hash, so client ids stay out of Redis keys and tables. */
export function clientBucket(clientId: string): string {
  return `fhir:client:${crypto.createHash('sha256').update(clientId).digest('base64url').slice(0, 22)}`;
}

/**
 * A fixed window per client_id over all /fhir requests, shared by the replicas (counted in
 * request-ledger.ts), with the headers of the authorization server: `x-rate-limit-*` on every
 * answer, 429 `rate_limit_exceeded` with Retry-After. Returns the headers
 * of an admitted request.
 */
export function withinRateLimit(r: RateLimitResult): Record<string, string> {
  const headers = rateLimitHeaders(r);
  if (!r.allowed) throw new RateLimitExceeded('too many requests from this client', { headers });
  return headers;
}
