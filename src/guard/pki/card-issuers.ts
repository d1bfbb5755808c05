import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { pemCertificates } from './certificate-builder';
import { devPkiFor } from './dev-pki';
import { RefreshedList, type ListState } from './refreshed-list';
import { cardIssuers, readTrustStatusList } from './tsl/trust-status-list';
import { verifyListSignature } from './tsl/verify-list-signature';

/**
 * The CAs whose institution cards the guard trusts: CARD_TRUST_ANCHORS, the card-issuing CAs of the
 * gematik TSL (CARD_TSL), both merged; with neither, the generated development CA (with a warning).
 * The TSL is verified, kept under DATA_DIR and refreshed (refreshed-list.ts).
 */
export class CardIssuers {
  private merged?: { listed: crypto.X509Certificate[] | undefined; anchors: crypto.X509Certificate[] };

  constructor(
    private readonly fixed: crypto.X509Certificate[],
    private readonly tsl?: RefreshedList<crypto.X509Certificate[]>,
  ) {}

  /** Reads the TSL (stored copy, then source) once; a start-up error when no list can be had. */
  async load(): Promise<void> {
    await this.tsl?.load();
  }

  /**
   * The anchors in force now; the same array until they change (the card-chain cache keys on it).
   * Without a usable TSL only the fixed anchors remain: /readyz says why.
   */
  async anchors(): Promise<crypto.X509Certificate[]> {
    if (!this.tsl) return this.fixed;
    await this.tsl.load().catch(() => undefined);
    const listed = this.tsl.value();
    if (!this.merged || this.merged.listed !== listed) this.merged = { listed, anchors: [...this.fixed, ...(listed ?? [])] };
    return this.merged.anchors;
  }

  /**
   * For /readyz: without a usable list the guard can still admit cards of CARD_TRUST_ANCHORS
   * (degraded); with only the list configured, it admits none (unavailable).
   */
  readiness(): ListState | 'not used' {
    if (!this.tsl) return 'not used';
    const state = this.tsl.state();
    if (state.status === 'unavailable' && this.fixed.length > 0) return { ...state, status: 'degraded' };
    return state;
  }

  stop(): void {
    this.tsl?.stop();
  }
}

/** Builds the card issuers of this configuration; a CARD_TRUST_ANCHORS file without certificates stops the start. */
export function cardIssuersFor(ctx: AppContext): CardIssuers {
  const { cardTrustAnchors, cardTsl } = ctx.config;
  let fixed: crypto.X509Certificate[] = [];
  if (cardTrustAnchors) {
    fixed = pemCertificates(fs.readFileSync(cardTrustAnchors, 'utf8')).map((der) => new crypto.X509Certificate(der));
    if (fixed.length === 0) throw new Error(`CARD_TRUST_ANCHORS: no certificate in ${cardTrustAnchors}`);
  } else if (!cardTsl) {
    ctx.logger.warn('CARD_TRUST_ANCHORS and CARD_TSL are unset: trusting the generated development card CA (never do this in production)');
    fixed = [new crypto.X509Certificate(devPkiFor(ctx).ca.certPem)];
  }
  if (!cardTsl) return new CardIssuers(fixed);
  const signerCas = pemCertificates(fs.readFileSync(cardTsl.signerCa, 'utf8')).map((der) => new crypto.X509Certificate(der));
  const list = new RefreshedList<crypto.X509Certificate[]>({
    name: 'CARD_TSL',
    source: cardTsl.source,
    storeFile: path.join(ctx.config.dataDir, 'trust', 'card-tsl.xml'),
    refreshMs: cardTsl.refreshSec * 1000,
    graceMs: cardTsl.graceSec * 1000,
    now: ctx.now,
    logger: ctx.logger,
    async decode(text, now) {
      const { signedXml } = await verifyListSignature(text, signerCas, now, `the TSL (CARD_TSL ${cardTsl.source})`);
      const tsl = readTrustStatusList(signedXml, `the TSL (CARD_TSL ${cardTsl.source})`);
      return { value: cardIssuers(tsl, now), nextUpdate: tsl.nextUpdate, sequence: tsl.sequenceNumber };
    },
  });
  return new CardIssuers(fixed, list);
}
