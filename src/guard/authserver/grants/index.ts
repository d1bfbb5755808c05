import { authorizationCodeGrant } from './authorization-code';
import { Grants, type Grant } from './grant';
import { refreshTokenGrant } from './refresh-token';
import { tokenExchangeGrant } from './token-exchange';
import { workloadExchangeGrant } from './workload-exchange';

export { defineGrant, Grants, type ClientAuthentication, type Grant, type GrantForm, type GrantRequest, type NonceNeed, type TokenAnswer } from './grant';

/**
 * The grants of the token endpoint, one entry each, in the order they are tried: a workload's
 * token exchange, a client's, the authorization code, the refresh; then `extra` ones an application
 * is composed with (guard/router.ts). Discovery's `grant_types_supported` and the `grant_types` a
 * client may register are theirs. A new grant is one entry here, its handler in this folder.
 */
export function tokenGrants(extra: readonly Grant[] = []): Grants {
  return new Grants([workloadExchangeGrant, tokenExchangeGrant, authorizationCodeGrant, refreshTokenGrant, ...extra]);
}
