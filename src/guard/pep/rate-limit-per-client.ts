import crypto from 'node:crypto';
import type { Response } from 'express';
import { RateLimitExceeded } from '../errors';
import type { RateLimitResult } from '../state/rate-limit';

/** The rate-limit bucket of a client: a hash, so client ids stay out of Redis keys and tables. */
export function clientBucket(clientId: string): string {
  return `fhir:client:${crypto.createHash('sha256').update(clientId).digest('base64url').slice(0, 22)}`;
}

/**
 * Issue 6 point 6: a fixed window per client_id over all /fhir requests, shared by the replicas
 * (counted in request-ledger.ts), with the headers of the authorization server: `x-rate-limit-*`
 * on every answer (seed 000 section 8), 429 `rate_limit_exceeded` with Retry-After.
 */
export function withinRateLimit(r: RateLimitResult, res: Response): void {
  res.setHeader('x-rate-limit-limit', String(r.limit));
  res.setHeader('x-rate-limit-remaining', String(r.remaining));
  res.setHeader('x-rate-limit-reset', String(r.resetAt));
  if (!r.allowed) throw new RateLimitExceeded('too many requests from this client', { headers: { 'Retry-After': String(r.retryAfter) } });
}
