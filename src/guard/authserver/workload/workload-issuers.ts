import { createRemoteJWKSet, type JWTVerifyGetKey } from 'jose';
import type { WorkloadIssuer } from '../../../config';

/** The issuer's OpenID configuration or keys could not be fetched: 503, the workload may retry. */
export class WorkloadIssuerUnreachable extends Error {}

const FETCH_TIMEOUT_MS = 5_000;
const METADATA_TTL_MS = 3_600_000;
/** docs/requirements.md, Workload token exchange: an unknown `kid` refetches the key set, at most once a minute. */
const REFETCH_COOLDOWN_MS = 60_000;

/**
 * The issuers of WORKLOAD_ISSUERS_FILE and their keys: `jwks_uri` as configured, or from the
 * issuer's `/.well-known/openid-configuration` (whose `issuer` must be the configured one).
 * jose's remote key set caches the keys and refetches on an unknown `kid` after the cooldown, so a
 * rotated key is found and garbage `kid`s cannot hammer the issuer.
 */
export class WorkloadIssuers {
  private readonly keySets = new Map<string, { keys: JWTVerifyGetKey; until: number }>();
  /** Issuers whose discovery failed, until when they are not asked again (503 meanwhile). */
  private readonly failed = new Map<string, { error: WorkloadIssuerUnreachable; until: number }>();

  constructor(
    readonly issuers: readonly WorkloadIssuer[],
    private readonly now: () => Date = () => new Date(),
    private readonly refetchCooldownMs = REFETCH_COOLDOWN_MS,
  ) {}

  find(iss: unknown): WorkloadIssuer | undefined {
    return typeof iss === 'string' ? this.issuers.find((i) => i.issuer === iss.replace(/\/+$/, '')) : undefined;
  }

  async keysOf(issuer: WorkloadIssuer): Promise<JWTVerifyGetKey> {
    const now = this.now().getTime();
    const hit = this.keySets.get(issuer.issuer);
    if (hit && hit.until > now) return hit.keys;
    const down = this.failed.get(issuer.issuer);
    if (down && down.until > now) throw down.error;
    let jwksUri: URL;
    try {
      jwksUri = new URL(issuer.jwksUri ?? (await discoverJwksUri(issuer.issuer)));
    } catch (err) {
      const error = err instanceof WorkloadIssuerUnreachable ? err : new WorkloadIssuerUnreachable(`the jwks_uri of ${issuer.issuer} is not a URL`);
      this.failed.set(issuer.issuer, { error, until: now + this.refetchCooldownMs });
      throw error;
    }
    this.failed.delete(issuer.issuer);
    const keys = createRemoteJWKSet(jwksUri, { timeoutDuration: FETCH_TIMEOUT_MS, cacheMaxAge: METADATA_TTL_MS, cooldownDuration: this.refetchCooldownMs });
    this.keySets.set(issuer.issuer, { keys, until: this.now().getTime() + METADATA_TTL_MS });
    return keys;
  }
}

/** Whether `sub` is one the issuer's entry allows: exact, or by a prefix written with a trailing `*`. */
export function subjectAllowed(issuer: WorkloadIssuer, sub: string): boolean {
  return issuer.subjects.some((s) => (s.endsWith('*') ? sub.startsWith(s.slice(0, -1)) : s === sub));
}

async function discoverJwksUri(iss: string): Promise<string> {
  let body: unknown;
  try {
    const res = await fetch(`${iss}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    body = await res.json();
  } catch (err) {
    throw new WorkloadIssuerUnreachable(`the OpenID configuration of ${iss} could not be fetched: ${(err as Error).message}`);
  }
  const m = (typeof body === 'object' && body !== null ? body : {}) as { issuer?: unknown; jwks_uri?: unknown };
  if (typeof m.issuer !== 'string' || m.issuer.replace(/\/+$/, '') !== iss || typeof m.jwks_uri !== 'string') {
    throw new WorkloadIssuerUnreachable(`the OpenID configuration of ${iss} names another issuer or no jwks_uri`);
  }
  return m.jwks_uri;
}
