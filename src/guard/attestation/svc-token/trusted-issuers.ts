import { createRemoteJWKSet, type JWTVerifyGetKey } from 'jose';

/** The issuer's metadata or keys could not be fetched: the guard answers 503, the client may retry. */
export class IssuerUnreachable extends Error {}

const METADATA_TTL_MS = 3_600_000;
const FETCH_TIMEOUT_MS = 5_000;

/**
 * Keys of the other guard instances in TRUSTED_ATTESTATION_ISSUERS: each issuer's RFC 8414 metadata
 * (its `issuer` must be the one configured) gives `jwks_uri`; jose's remote key set fetches and
 * caches the keys there and refetches on an unknown `kid` (rotation), at most once per cooldown.
 */
export class TrustedIssuers {
  private readonly cache = new Map<string, { keys: JWTVerifyGetKey; until: number }>();

  constructor(
    readonly issuers: readonly string[],
    private readonly now: () => Date = () => new Date(),
  ) {}

  isTrusted(iss: string): boolean {
    return this.issuers.includes(iss);
  }

  async keysOf(iss: string): Promise<JWTVerifyGetKey> {
    const hit = this.cache.get(iss);
    if (hit && hit.until > this.now().getTime()) return hit.keys;
    const metadata = await fetchMetadata(iss);
    const keys = createRemoteJWKSet(new URL(metadata.jwks_uri), { timeoutDuration: FETCH_TIMEOUT_MS, cacheMaxAge: METADATA_TTL_MS, cooldownDuration: 30_000 });
    this.cache.set(iss, { keys, until: this.now().getTime() + METADATA_TTL_MS });
    return keys;
  }
}

async function fetchMetadata(iss: string): Promise<{ jwks_uri: string }> {
  let body: unknown;
  try {
    const res = await fetch(`${iss}/.well-known/oauth-authorization-server`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    body = await res.json();
  } catch (err) {
    throw new IssuerUnreachable(`the metadata of ${iss} could not be fetched: ${(err as Error).message}`);
  }
  const m = body as { issuer?: unknown; jwks_uri?: unknown };
  if (m.issuer !== iss || typeof m.jwks_uri !== 'string') throw new IssuerUnreachable(`the metadata of ${iss} names another issuer or no jwks_uri`);
  const u = new URL(m.jwks_uri);
  if (u.origin !== new URL(iss).origin) throw new IssuerUnreachable(`the jwks_uri of ${iss} is on another origin`);
  return { jwks_uri: m.jwks_uri };
}
