import type crypto from 'node:crypto';
import * as pkijs from 'pkijs';
import type { Logger } from 'pino';
import { askOcsp, ocspResponderOf, type OcspAnswer } from '../common/pki/ocsp';

export interface StaplerSettings {
  /** The answer is asked for again at half its remaining validity, and at least this often. */
  maxRefreshMs: number;
  /** After a failed request (responder down, an answer that fails its checks): the next try. */
  retryMs: number;
  /** Never sooner than this after an answer (a responder answering with a nextUpdate of now). */
  minRefreshMs?: number;
}

const DEFAULTS: StaplerSettings = { maxRefreshMs: 3_600_000, retryMs: 60_000 };
const MIN_REFRESH_MS = 10_000;

/**
 * OCSP stapling (RFC 6066 §8, RFC 6961's single-answer form) of the server's own certificate: the
 * responder its authorityInfoAccess names is asked before the first handshake and again before
 * the answer's nextUpdate; while the responder is down the last good answer is stapled until its
 * nextUpdate, then none. A revoked answer is stapled as it is (clients must refuse) and logged.
 */
export class OcspStapler {
  private answer?: OcspAnswer;
  private timer?: NodeJS.Timeout;
  private generation = 0;
  private target?: { url: string; leaf: pkijs.Certificate; issuer: pkijs.Certificate; subject: string };

  constructor(
    private readonly logger: Logger,
    private readonly now: () => Date,
    private readonly settings: StaplerSettings = DEFAULTS,
  ) {}

  /** The DER answer to staple now, if a current one is at hand. */
  current(): Buffer | undefined {
    const a = this.answer;
    if (!a || (a.nextUpdate && a.nextUpdate.getTime() <= this.now().getTime())) return undefined;
    return a.der;
  }

  /** The status of the answer stapled now (for logs and tests). */
  status(): OcspAnswer['status'] | undefined {
    return this.current() ? this.answer?.status : undefined;
  }

  /** Staples for this certificate from now on: the previous certificate's answer is dropped. */
  async follow(leaf: crypto.X509Certificate, issuer: crypto.X509Certificate | undefined): Promise<void> {
    this.stop();
    this.answer = undefined;
    const generation = ++this.generation;
    if (!issuer) {
      this.logger.warn({ subject: leaf.subject }, 'OCSP stapling: TLS_CERT_FILE holds no issuer certificate after the server certificate; nothing is stapled');
      return;
    }
    const parsed = pkijs.Certificate.fromBER(new Uint8Array(leaf.raw));
    const url = ocspResponderOf(parsed);
    if (!url) {
      this.logger.warn({ subject: leaf.subject }, 'OCSP stapling: the server certificate names no OCSP responder; nothing is stapled');
      return;
    }
    this.target = { url, leaf: parsed, issuer: pkijs.Certificate.fromBER(new Uint8Array(issuer.raw)), subject: leaf.subject };
    await this.refresh(generation);
  }

  /** Asks the responder now (also what the timer runs). */
  async refresh(generation = this.generation): Promise<void> {
    const target = this.target;
    if (!target || generation !== this.generation) return;
    let next: number;
    try {
      const answer = await askOcsp(target.url, target.leaf, target.issuer, this.now());
      if (generation !== this.generation) return;
      this.answer = answer;
      const log = { responder: target.url, subject: target.subject, status: answer.status, nextUpdate: answer.nextUpdate?.toISOString() };
      if (answer.status === 'good') this.logger.info(log, 'OCSP stapling: answer renewed');
      else this.logger.error(log, `OCSP stapling: the responder says the server certificate is ${answer.status}; clients will refuse it`);
      const remaining = (answer.nextUpdate?.getTime() ?? Infinity) - this.now().getTime();
      next = Math.max(this.settings.minRefreshMs ?? MIN_REFRESH_MS, Math.min(this.settings.maxRefreshMs, remaining / 2));
    } catch (err) {
      if (generation !== this.generation) return;
      this.logger.warn({ responder: target.url, err: (err as Error).message, stapled: this.current() ? 'the last good answer' : 'none' }, 'OCSP stapling: no usable answer');
      next = this.settings.retryMs;
    }
    this.timer = setTimeout(() => void this.refresh(generation), next);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
