import { InvalidScope } from '../errors';
import { allowedScopes, type PolicyData } from '../policy';

/**
 * The scopes asked for: the `scope` parameter, or the role's defaults when absent (requestor
 * scopes, plus the owner scopes for REPOSITORY_OWNERS). Whether they are allowed is the policy's decision.
 */
export function requestedScopes(params: Map<string, string>, data: PolicyData, repositoryOwner: boolean): string[] {
  const raw = params.get('scope');
  if (raw === undefined || raw.trim() === '') return allowedScopes(data, repositoryOwner);
  const scopes = [...new Set(raw.split(' ').filter(Boolean))];
  // RFC 6749 §3.3 scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
  if (scopes.length > 50 || !scopes.every((s) => /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/.test(s))) throw new InvalidScope('scope is malformed');
  return scopes;
}
