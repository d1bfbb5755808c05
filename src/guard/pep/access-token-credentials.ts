import { InvalidRequest, InvalidToken } from '../errors';
import { MissingCredentials } from './errors';
import { oneAuthorization } from '../http/authorization-header';

export interface PresentedCredentials {
  /** The Authorization header as received: every value when it came more than once. */
  authorization: string | readonly string[] | undefined;
  /** The request's query names an `access_token` parameter. */
  tokenInQuery: boolean;
}

/** RFC 7235 token68. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * The access token of a resource request: only `Authorization: DPoP <at>` (scheme
 * case-insensitive, RFC 7235 §2.1). A token in the query is refused (RFC 6750 §2.3 is not
 * supported: URLs end up in logs), a `Bearer` token too: every token we issue is DPoP-bound and
 * sending it as Bearer is a downgrade (RFC 9449 §7.2).
 */
export function accessTokenFrom(c: PresentedCredentials): string {
  // RFC 6750 §2: one method per request; and the query is not one we accept.
  if (c.tokenInQuery) throw new InvalidRequest('access tokens are accepted in the Authorization header only');
  const value = oneAuthorization(c.authorization)?.trim();
  if (!value) {
    throw new MissingCredentials('the request carries no access token; send Authorization: DPoP <token> with a DPoP proof');
  }
  const [scheme, ...rest] = value.split(/\s+/);
  if (scheme.toLowerCase() === 'bearer') throw new InvalidToken('the access token is DPoP-bound: use the DPoP authorization scheme (RFC 9449 §7.2)');
  if (scheme.toLowerCase() !== 'dpop') throw new MissingCredentials('only the DPoP authorization scheme is supported');
  if (rest.length !== 1 || !TOKEN68.test(rest[0])) throw new InvalidToken('the Authorization header does not carry one access token');
  return rest[0];
}

