import { GuardError } from '../errors';
import { DPOP_ALGS } from '../dpop/verify-dpop-proof';

/**
 * The enforcement point's additions to the guard's error vocabulary (guard/errors.ts). A 401 at
 * the resource always carries the DPoP challenge (RFC 9449 §7.1, RFC 6750 §3): with the error
 * code, except when the request carried no credentials at all (RFC 6750 §3.1).
 */
function dpopChallenge(code?: string, params: Record<string, string> = {}): string {
  const attrs = [...(code ? [`error="${code}"`] : []), ...Object.entries(params).map(([k, v]) => `${k}="${v}"`), `algs="${DPOP_ALGS.join(' ')}"`];
  return `DPoP ${attrs.join(', ')}`;
}

/**
 * A scope as RFC 6749 §3.3 spells scope tokens (NQCHAR: %x21 / %x23-5B / %x5D-7E), which is what
 * RFC 6750 §3 allows in the challenge's `scope`. A scope named after the request (the type of a
 * chained parameter with multibyte or undecodable characters) may hold others: those are
 * percent-encoded as UTF-8, so the challenge stays a valid header value (RFC 9110 §5.5) and a
 * quoted-string (no `"` or `\`).
 */
function scopeToken(scope: string): string {
  return scope.replace(/[^\x21\x23-\x5b\x5d-\x7e]/gu, (ch) => [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}

/** Adds the DPoP challenge to a 401 that has none yet (errors thrown by shared checks such as verifyDpopProof). */
export function withChallenge(err: GuardError): GuardError {
  if (err.status !== 401 || err.headers['WWW-Authenticate']) return err;
  return new GuardError(err.code, err.status, err.description, { extra: err.extra, headers: { ...err.headers, 'WWW-Authenticate': dpopChallenge(err.code) } });
}

/** The request carried no access token (RFC 6750 §3.1: a challenge without an error code). */
export class MissingCredentials extends GuardError {
  constructor(description: string) {
    super('invalid_token', 401, description, { headers: { 'WWW-Authenticate': dpopChallenge() } });
  }
}

/** RFC 6750 §3.1: a valid token without the scope the interaction needs. */
export class InsufficientScope extends GuardError {
  constructor(readonly missing: string[]) {
    super('insufficient_scope', 403, `the access token lacks the scope ${missing.join(' ')}`, {
      headers: { 'WWW-Authenticate': dpopChallenge('insufficient_scope', { scope: missing.map(scopeToken).join(' ') }) },
    });
  }
}

/** A route that needs a proof of patient presence was called without a `PoPP` header (ngx-pep 1.0.0: 400). */
export class PoppMissing extends GuardError {
  constructor(description = 'this route requires a PoPP header') {
    super('invalid_request', 400, description);
  }
}

/** The PoPP token is not acceptable (signature, issuer key, times, actor): 403 (ZETA UC17). */
export class InvalidPopp extends GuardError {
  constructor(description: string) {
    super('invalid_popp', 403, description);
  }
}

/** The protected application failed in a way the client must not see (ZETA A_26974-01 `svc-cause: Proxy`, unreachable upstream). */
export class UpstreamFailure extends GuardError {
  constructor(description: string, status = 500) {
    super('server_error', status, description);
  }
}
