import type { NextFunction, Request, Response } from 'express';
import { ApiVersionGone, ResourceNotFound } from './errors';

export type ApiVersionStatus = 'stable' | 'beta' | 'deprecated' | 'shut_down';

export interface ApiVersion {
  major: number;
  /** Exact SemVer served for this major. */
  version: string;
  status: ApiVersionStatus;
}

/** Entry of `api_versions_supported`. */
export interface ApiVersionEntry {
  major_version: number;
  version: string;
  status: Exclude<ApiVersionStatus, 'shut_down'>;
  documentation_uri: string;
}

export function versionEntries(versions: ApiVersion[], issuer: string): ApiVersionEntry[] {
  return versions
    .filter((v): v is ApiVersion & { status: ApiVersionEntry['status'] } => v.status !== 'shut_down')
    .map((v) => ({ major_version: v.major, version: v.version, status: v.status, documentation_uri: `${issuer}/svc/v${v.major}` }));
}

/**
 * API versions (docs/requirements.md, Discovery and versioning) for `/svc/v{major}/…`: an unknown major is 404, a shut-down one 410, a
 * deprecated one is served with a `Warning` header (RFC 7234 §5.5, code 299).
 */
export function versionGate(versions: ApiVersion[]) {
  return (req: Request, res: Response, next: NextFunction) => {
    const major = Number(req.params.major);
    const v = versions.find((x) => x.major === major);
    if (!v) return next(new ResourceNotFound('no such API major version'));
    if (v.status === 'shut_down') return next(new ApiVersionGone(`API v${major} has been shut down`, { status: 410 }));
    if (v.status === 'deprecated') res.setHeader('Warning', `299 - "API v${major} is deprecated; migrate to a newer major version"`);
    res.locals.apiMajor = major;
    next();
  };
}
