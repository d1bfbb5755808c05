import type { PolicyData } from './types';

/** Scopes a requestor may get; owners (REPOSITORY_OWNERS) get the owner scopes in addition. */
export function allowedScopes(data: PolicyData, repositoryOwner: boolean): string[] {
  return repositoryOwner ? [...data.scopes.requestor, ...data.scopes.owner] : [...data.scopes.requestor];
}
