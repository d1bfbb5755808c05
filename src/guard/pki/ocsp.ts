import crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import type { Logger } from 'pino';
import { askOcsp, ocspResponderOf, type OcspStatus } from '../../common/pki/ocsp';

export type OcspMode = 'required' | 'if-present' | 'off';

/** The card is revoked, its status is unknown under `required`, or `required` finds no responder: 403. */
export class CardRevoked extends Error {}
/** The responder could not be asked or gave no usable answer under `required`: 503. */
export class OcspUnavailable extends Error {}

/**
 * Revocation of institution card certificates by OCSP (RFC 6960), CARD_OCSP: `required` (a card
 * without a responder, a responder that does not answer or an unknown status deny), `if-present`
 * (default: a card that names a responder is checked; revoked denies; no answer admits with a
 * warning) or `off`. The request, the response's signature and the responder's authorisation go
 * through pkijs; answers are cached until `nextUpdate` and at most `maxCacheSec`.
 */
export class OcspChecker {
  private readonly cache = new Map<string, { status: OcspStatus; until: number }>();
  /** The responder each (issuer, card) pair names, null for none: a certificate never changes, so it is parsed once. */
  private readonly responders = new Map<string, string | null>();

  constructor(
    readonly mode: OcspMode,
    private readonly maxCacheSec: number,
    private readonly logger: Logger,
    private readonly now: () => Date,
  ) {}

  async check(leafDer: Buffer, issuerDer: Buffer): Promise<void> {
    if (this.mode === 'off') return;
    const key = crypto.createHash('sha256').update(issuerDer).update(leafDer).digest('base64url');
    // Parsing the two certificates costs more than the rest of a token exchange's checks: only
    // the first check of a pair and a stale answer need them.
    let parsed: { leaf: pkijs.Certificate; issuer: pkijs.Certificate } | undefined;
    const parse = () => (parsed ??= { leaf: pkijs.Certificate.fromBER(new Uint8Array(leafDer)), issuer: pkijs.Certificate.fromBER(new Uint8Array(issuerDer)) });
    let url = this.responders.get(key);
    if (url === undefined) {
      url = ocspResponderOf(parse().leaf) ?? null;
      if (this.responders.size >= 10_000) this.responders.clear();
      this.responders.set(key, url);
    }
    if (!url) {
      if (this.mode === 'required') throw new CardRevoked('the card certificate names no OCSP responder (CARD_OCSP=required)');
      return;
    }
    const hit = this.cache.get(key);
    const status = hit && hit.until > this.now().getTime() ? hit.status : await this.ask(url, parse().leaf, parse().issuer, key);
    if (status === 'revoked') throw new CardRevoked('the card certificate is revoked (OCSP)');
    if (status === 'unknown') {
      if (this.mode === 'required') throw new CardRevoked('the OCSP responder does not know the card certificate');
      this.logger.warn({ responder: url }, 'OCSP: card certificate status unknown, admitted (CARD_OCSP=if-present)');
    }
  }

  private async ask(url: string, leaf: pkijs.Certificate, issuer: pkijs.Certificate, key: string): Promise<OcspStatus | 'unknown'> {
    try {
      const { status, nextUpdate } = await askOcsp(url, leaf, issuer, this.now());
      const cap = this.now().getTime() + this.maxCacheSec * 1000;
      const until = Math.min(nextUpdate?.getTime() ?? this.now().getTime(), cap);
      if (until > this.now().getTime()) {
        if (this.cache.size >= 10_000) this.cache.clear();
        this.cache.set(key, { status, until });
      }
      return status;
    } catch (err) {
      if (this.mode === 'required') throw new OcspUnavailable(`OCSP responder ${url}: ${(err as Error).message}`);
      this.logger.warn({ responder: url, err: (err as Error).message }, 'OCSP: no usable answer, card admitted (CARD_OCSP=if-present)');
      return 'good';
    }
  }
}
