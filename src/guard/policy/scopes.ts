import type { PolicyData } from './types';

/** Scopes a requestor may get; owners (REPOSITORY_OWNERS) get the owner scopes in addition (CONTRACT 4). */
export function allowedScopes(data: PolicyData, repositoryOwner: boolean): string[] {
  return repositoryOwner ? [...data.scopes.requestor, ...data.scopes.owner] : [...data.scopes.requestor];
}

const SMART = /^system\/(\*|[A-Z][A-Za-z]+)\.(c?r?u?d?s?)$/;

/** SMART v2: `system/Appointment.rs` is covered by itself or by `system/*.cruds` (permissions a subset). */
export function scopeCovered(requested: string, allowed: string[]): boolean {
  if (allowed.includes(requested)) return true;
  const r = SMART.exec(requested);
  if (!r || !r[2]) return false;
  return allowed.some((a) => {
    const m = SMART.exec(a);
    return m !== null && (m[1] === '*' || m[1] === r[1]) && [...r[2]].every((p) => m[2].includes(p));
  });
}
