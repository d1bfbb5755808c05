import fs from 'node:fs';
import { TemporarilyUnavailable } from '../../errors';

/** Refetched after an hour; a copy older than a day is not used (fail closed: a stale list could miss a revoked key). */
const REFRESH_MS = 3_600_000;
const MAX_AGE_MS = 86_400_000;
const FETCH_TIMEOUT_MS = 10_000;

type Entries = Record<string, { status?: unknown }>;

/**
 * Google's attestation status list (android/keyattestation
 * `GoogleRevocationList.kt`): `{entries: {<serial hex>: {status: "REVOKED" | "SUSPENDED", ...}}}`.
 * Only REVOKED revokes, as in Google's library. Fetched from a URL or read from a file, cached;
 * when it cannot be had and the copy held is older than a day, registrations fail (503) rather
 * than pass unchecked.
 */
export class RevocationList {
  private entries?: Entries;
  private fetchedAt = 0;
  private loading?: Promise<void>;
  /** After a failed fetch the held copy serves a minute before the next try. */
  private retryAt = 0;

  constructor(
    private readonly source: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The first serial (as an X509Certificate prints it) the list marks REVOKED. */
  async revokedAmong(serials: string[]): Promise<string | undefined> {
    const entries = await this.current();
    return serials.find((s) => String(entries[normalizeSerial(s)]?.status ?? '').toUpperCase() === 'REVOKED');
  }

  private async current(): Promise<Entries> {
    const now = this.now().getTime();
    if (!this.entries || (now - this.fetchedAt > REFRESH_MS && now >= this.retryAt)) {
      this.loading ??= this.load().finally(() => {
        this.loading = undefined;
      });
      try {
        await this.loading;
      } catch (err) {
        this.retryAt = this.now().getTime() + 60_000;
        if (!this.entries || this.now().getTime() - this.fetchedAt > MAX_AGE_MS) {
          throw new TemporarilyUnavailable(`revocation_list_unavailable: the attestation status list cannot be read (${(err as Error).message}); registrations wait until it can`);
        }
      }
    }
    if (this.now().getTime() - this.fetchedAt > MAX_AGE_MS) throw new TemporarilyUnavailable('revocation_list_unavailable: the attestation status list held is older than a day');
    return this.entries!;
  }

  private async load(): Promise<void> {
    let text: string;
    if (/^https?:\/\//.test(this.source)) {
      const res = await fetch(this.source, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      text = await res.text();
    } else {
      text = await fs.promises.readFile(this.source, 'utf8');
    }
    const body = JSON.parse(text) as { entries?: unknown };
    if (typeof body.entries !== 'object' || body.entries === null || Array.isArray(body.entries)) throw new Error('no entries object');
    this.entries = Object.fromEntries(Object.entries(body.entries as Entries).map(([k, v]) => [normalizeSerial(k), v]));
    this.fetchedAt = this.now().getTime();
  }
}

/** Google keys the list by BigInteger.toString(16): lower case, no leading zeros; Node prints upper case and may keep a leading 0. */
export function normalizeSerial(serial: string): string {
  return serial.toLowerCase().replace(/^0+(?=.)/, '');
}
