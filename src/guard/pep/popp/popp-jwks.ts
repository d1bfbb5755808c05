import type crypto from 'node:crypto';
import { importJWK, type JWK } from 'jose';
import type { Logger } from '../../../logger';

export interface PoppJwksOptions {
  url: string;
  now: () => Date;
  logger: Logger;
  refreshSec: number;
  staleSec: number;
  timeoutMs: number;
}

/**
 * The PoPP issuer's signing keys (ZETA UC17/UC22, ngx-pep `pep_popp_issuer`): fetched on first
 * use and every `refreshSec` after; when the issuer fails, the last good set serves until
 * `staleSec` after it was fetched, then nothing verifies (fail closed, 403). One fetch at a time.
 */
export class PoppJwks {
  private keys = new Map<string, crypto.KeyObject>();
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private attemptedAt = Number.NEGATIVE_INFINITY;
  private inFlight?: Promise<void>;

  constructor(private readonly o: PoppJwksOptions) {}

  /** The ES256 key with this kid, or undefined (unknown kid, or no usable key set). */
  async key(kid: string): Promise<crypto.KeyObject | undefined> {
    const now = this.o.now().getTime();
    if (now - this.attemptedAt >= this.o.refreshSec * 1000) await this.refresh();
    // An unknown kid may be a rotated key: refetch, at most every 30 s.
    else if (!this.keys.has(kid) && now - this.attemptedAt >= 30_000) await this.refresh();
    if (this.o.now().getTime() - this.fetchedAt > this.o.staleSec * 1000) return undefined;
    return this.keys.get(kid);
  }

  private refresh(): Promise<void> {
    this.inFlight ??= this.fetchKeys().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async fetchKeys(): Promise<void> {
    this.attemptedAt = this.o.now().getTime();
    try {
      const res = await fetch(this.o.url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(this.o.timeoutMs) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const body = (await res.json()) as { keys?: JWK[] };
      if (!Array.isArray(body.keys)) throw new Error('no keys array');
      const keys = new Map<string, crypto.KeyObject>();
      for (const jwk of body.keys) {
        // ZETA PoPP: ES256 on P-256 only; other members of the set are ignored.
        if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.kid !== 'string' || 'd' in jwk) continue;
        if (jwk.alg !== undefined && jwk.alg !== 'ES256') continue;
        keys.set(jwk.kid, (await importJWK({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, 'ES256')) as crypto.KeyObject);
      }
      this.keys = keys;
      this.fetchedAt = this.o.now().getTime();
    } catch (err) {
      this.o.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'PoPP JWKS fetch failed; the cached key set stays in use until it is stale');
    }
  }
}
