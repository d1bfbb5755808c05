import fs from 'node:fs';
import path from 'node:path';
import { fetch, type Response } from 'undici';
import type { Logger } from '../../logger';
import { trustListNextUpdate, trustListRefreshes } from '../../server-lib/metrics';
import { MAX_LIST_BYTES, TrustListRejected } from './tsl/xml-dom';

/** What a list of trust anchors decodes to, and the list's own statements about its freshness. */
export interface DecodedList<T> {
  value: T;
  /** When the publisher promises the next list; past it (plus the grace), the list is refused. */
  nextUpdate?: Date;
  /** A newer list has a higher number; a lower one is a rollback and refused. */
  sequence?: bigint;
}

export interface RefreshedListOptions<T> {
  /** The configuration variable naming the list (messages, metrics, /readyz). */
  name: string;
  /** A file path or an http(s) URL. */
  source: string;
  /** The last good list is kept here (under DATA_DIR) and used when the source cannot be read. */
  storeFile: string;
  refreshMs: number;
  graceMs: number;
  /** Verifies and decodes the bytes; throws TrustListRejected. */
  decode: (text: string, now: Date) => Promise<DecodedList<T>>;
  now: () => Date;
  logger: Logger;
}

export type ListState =
  | { status: 'ok'; sequence?: string; nextUpdate?: string }
  | { status: 'degraded' | 'unavailable'; reason: string; sequence?: string; nextUpdate?: string };

const FETCH_TIMEOUT_MS = 30_000;
// undici's fetch (the one Node bundles, as a package): its global dispatcher is where a deployment
// sets a proxy or extra CAs for the lists' hosts, and where the tests trust their own.

/**
 * A trust list that is read from its source, verified, kept on disk and refreshed: the last good
 * list stays in use while a refresh fails (degraded), a list older than the one in use is refused
 * (gematik TUC_PKI_001: the sequence number must increase), and a list whose NextUpdate lies more
 * than the grace in the past gives no trust at all (TUC_PKI_001 verifyTslValidity).
 */
export class RefreshedList<T> {
  private current?: DecodedList<T>;
  private lastFailure?: TrustListRejected;
  private loading?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private lastAttempt = 0;

  constructor(private readonly o: RefreshedListOptions<T>) {}

  /** The first load (once): the stored copy, then the source; throws when neither gives a list. */
  load(): Promise<void> {
    this.loading ??= this.firstLoad();
    return this.loading;
  }

  private async firstLoad(): Promise<void> {
    const stored = await this.readStored();
    await this.refresh();
    // Refreshed from now on whatever the first read gave: a source down at start is read again.
    this.timer = setInterval(() => void this.refresh(), this.o.refreshMs);
    this.timer.unref();
    if (!this.current) throw this.lastFailure ?? new TrustListRejected('unreachable', `${this.o.name}: no list`);
    if (stored && this.current === stored) this.o.logger.warn({ list: this.o.name, file: this.o.storeFile }, 'trust list: using the stored copy, the source could not be read');
  }

  /**
   * The list's value for a caller that can go on without one (attestation roots): loaded on first
   * use, and while there is none the source is read again on use, at most every `retryMs`, rather
   * than only at the next scheduled refresh.
   */
  async valueOnUse(retryMs: number): Promise<T | undefined> {
    await this.load().catch(() => undefined);
    if (!this.current && this.o.now().getTime() - this.lastAttempt >= retryMs) await this.refresh();
    return this.value();
  }

  /** Reads the source; a good list newer than (or as new as) the one in use replaces it and is stored. */
  async refresh(): Promise<void> {
    const now = this.o.now();
    this.lastAttempt = now.getTime();
    try {
      const text = await this.fetchSource();
      const next = await this.o.decode(text, now);
      this.notARollback(next);
      this.usable(next, now);
      await this.store(text).catch((err: unknown) => this.o.logger.warn({ list: this.o.name, file: this.o.storeFile, err: (err as Error).message }, 'trust list: the good list could not be kept on disk'));
      const changed = this.current?.sequence !== next.sequence || this.current === undefined;
      this.current = next;
      this.lastFailure = undefined;
      trustListRefreshes.inc({ list: this.o.name, outcome: 'ok' });
      if (next.nextUpdate) trustListNextUpdate.set({ list: this.o.name }, next.nextUpdate.getTime() / 1000);
      if (changed) this.o.logger.info({ list: this.o.name, sequence: next.sequence?.toString(), nextUpdate: next.nextUpdate?.toISOString() }, 'trust list in use');
    } catch (err) {
      const failure = err instanceof TrustListRejected ? err : new TrustListRejected('unreachable', `${this.o.name}: ${(err as Error).message}`);
      this.lastFailure = failure;
      trustListRefreshes.inc({ list: this.o.name, outcome: failure.code });
      this.o.logger.warn({ list: this.o.name, source: this.o.source, code: failure.code, err: failure.message }, this.current ? 'trust list refresh failed: the last good list stays in use' : 'trust list refresh failed: no list in use');
    }
  }

  /** The list's value, or undefined when there is none or it is expired past the grace. */
  value(): T | undefined {
    if (!this.current) return undefined;
    return this.expiredPastGrace(this.current, this.o.now()) ? undefined : this.current.value;
  }

  state(): ListState {
    const c = this.current;
    const facts = { sequence: c?.sequence?.toString(), nextUpdate: c?.nextUpdate?.toISOString() };
    if (!c) return { status: 'unavailable', reason: this.lastFailure?.message ?? 'not loaded yet', ...facts };
    const now = this.o.now();
    if (this.expiredPastGrace(c, now)) return { status: 'unavailable', reason: `the list in use is past its NextUpdate (${facts.nextUpdate}) by more than the grace`, ...facts };
    if (c.nextUpdate && c.nextUpdate < now) return { status: 'degraded', reason: `the list in use is past its NextUpdate (${facts.nextUpdate})`, ...facts };
    if (this.lastFailure) return { status: 'degraded', reason: `the last refresh failed: ${this.lastFailure.message}`, ...facts };
    return { status: 'ok', ...facts };
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async readStored(): Promise<DecodedList<T> | undefined> {
    let text: string;
    try {
      text = await fs.promises.readFile(this.o.storeFile, 'utf8');
    } catch {
      return undefined;
    }
    try {
      const stored = await this.o.decode(text, this.o.now());
      this.current = stored;
      return stored;
    } catch (err) {
      this.o.logger.warn({ list: this.o.name, file: this.o.storeFile, err: (err as Error).message }, 'trust list: the stored copy is not usable');
      return undefined;
    }
  }

  private async fetchSource(): Promise<string> {
    const { source, name } = this.o;
    if (!/^https?:\/\//.test(source)) {
      const stat = await fs.promises.stat(source).catch(() => undefined);
      if (!stat?.isFile()) throw new TrustListRejected('unreachable', `${name}: file not found: ${source}`);
      if (stat.size > MAX_LIST_BYTES) throw new TrustListRejected('malformed', `${name}: ${source} is larger than ${MAX_LIST_BYTES} bytes`);
      return fs.promises.readFile(source, 'utf8');
    }
    let res: Response;
    try {
      res = await fetch(source, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'follow' });
    } catch (err) {
      throw new TrustListRejected('unreachable', `${name}: ${source} could not be fetched: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new TrustListRejected('unreachable', `${name}: ${source} answered HTTP ${res.status}`);
    }
    if (Number(res.headers.get('content-length') ?? 0) > MAX_LIST_BYTES) {
      await res.body?.cancel();
      throw new TrustListRejected('malformed', `${name}: ${source} is larger than ${MAX_LIST_BYTES} bytes`);
    }
    return res.text();
  }

  private notARollback(next: DecodedList<T>): void {
    const held = this.current?.sequence;
    if (held !== undefined && next.sequence !== undefined && next.sequence < held) {
      throw new TrustListRejected('rollback', `${this.o.name}: the list read has sequence number ${next.sequence}, older than the one in use (${held})`);
    }
  }

  private usable(next: DecodedList<T>, now: Date): void {
    if (this.expiredPastGrace(next, now)) {
      throw new TrustListRejected('expired', `${this.o.name}: the list's NextUpdate (${next.nextUpdate!.toISOString()}) is past by more than the grace of ${Math.round(this.o.graceMs / 3_600_000)} h`);
    }
  }

  private expiredPastGrace(list: DecodedList<T>, now: Date): boolean {
    return list.nextUpdate !== undefined && now.getTime() > list.nextUpdate.getTime() + this.o.graceMs;
  }

  /** Written beside and renamed over: a reader never sees half a list. */
  private async store(text: string): Promise<void> {
    await fs.promises.mkdir(path.dirname(this.o.storeFile), { recursive: true });
    const tmp = `${this.o.storeFile}.${process.pid}.tmp`;
    await fs.promises.writeFile(tmp, text);
    await fs.promises.rename(tmp, this.o.storeFile);
  }
}
