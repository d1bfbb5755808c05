import { dbReads, replicaLag } from '../../server-lib/metrics';
import type { Db, ReadRouting } from './db';
import { StoreUnavailable } from './errors';
import { openPgPool } from './pg-pool';

export interface ReplicaState {
  replica: string;
  status: 'ok' | 'lagging' | 'unreachable';
  /** How far behind the primary it was at the last look, in seconds. */
  lagSeconds?: number;
  reason?: string;
}

/**
 * Where a writer's last write is known across the application's replicas (Redis when configured),
 * beside this process's own memory of it.
 */
export interface SharedWriteMarks {
  mark(writer: string, atMs: number, ttlMs: number): Promise<void>;
  lastWrite(writer: string): Promise<number | undefined>;
}

export interface ReplicaSetOptions {
  /** A replica more than this behind the primary serves nobody (DATABASE_READ_MAX_LAG). */
  maxLagMs: number;
  /** How often the primary's and the replicas' WAL positions are read. */
  pollMs?: number;
  schema?: string;
  poolSize?: number;
  idleTimeoutSec?: number;
  /** The display form of each URL (no password), for /readyz and logs. */
  names?: string[];
}

/** Clocks of the application's replicas (a write mark set by another one) may differ by this much. */
const CLOCK_MARGIN_MS = 100;
const DEFAULT_POLL_MS = 200;

interface Replica {
  name: string;
  db: Db;
  /** The replica has replayed everything the primary had written at this time (epoch ms). */
  currentAsOf?: number;
  reachable: boolean;
  reason?: string;
}

/** A PostgreSQL `pg_lsn` (`16/B374D848`) as a number. */
export function lsnValue(text: string): bigint {
  const [hi, lo] = text.split('/');
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

/**
 * Read routing over streaming replicas. Replay is judged by WAL positions, not by clocks of the
 * database: every `pollMs` the primary's current WAL position is sampled with the time, and each
 * replica's replay position is read; a replica is then current as of the latest sample it has
 * replayed. A commit that returned before a sample was taken lies at or before that sample's
 * position, so a replica current as of a time after a writer's last commit has that write
 * (read-your-writes). A writer's last commit is remembered for the allowed lag (after that, every
 * replica fit to serve at all is current past it), in this process and, with Redis, for the other
 * replicas of the application.
 */
export class ReplicaSet implements ReadRouting {
  private readonly samples: { at: number; lsn: bigint }[] = [];
  private readonly replicas: Replica[];
  private readonly marks = new Map<string, number>();
  private shared?: SharedWriteMarks;
  private timer?: NodeJS.Timeout;
  private polling?: Promise<void>;
  private turn = 0;

  private constructor(
    private readonly primary: Db,
    replicas: { name: string; db: Db }[],
    private readonly o: ReplicaSetOptions,
  ) {
    this.replicas = replicas.map((r) => ({ ...r, reachable: false, reason: 'not read yet' }));
  }

  /** Opens a pool per replica URL and takes the first look at them before it serves. */
  static async open(primary: Db, urls: string[], o: ReplicaSetOptions): Promise<ReplicaSet> {
    // A replica is read-only: the schema is the primary's (made there), only the search path is set.
    const dbs = await Promise.all(urls.map((url) => openPgPool({ databaseUrl: url, schema: o.schema, createSchema: false, poolSize: o.poolSize, idleTimeoutSec: o.idleTimeoutSec })));
    const set = new ReplicaSet(primary, dbs.map((db, i) => ({ name: o.names?.[i] ?? `replica ${i + 1}`, db })), o);
    await set.poll();
    set.timer = setInterval(() => void set.poll(), o.pollMs ?? DEFAULT_POLL_MS);
    set.timer.unref();
    return set;
  }

  /** Shares write marks with the other replicas of the application (Redis). */
  shareWriteMarks(shared: SharedWriteMarks): void {
    this.shared = shared;
  }

  async read<T>(reader: string, read: (db: Db) => Promise<T>): Promise<T> {
    const replica = await this.replicaFor(reader);
    if (!replica) {
      dbReads.inc({ target: 'primary' });
      return read(this.primary);
    }
    dbReads.inc({ target: 'replica' });
    try {
      return await read(replica.db);
    } catch (err) {
      if (!(err instanceof StoreUnavailable)) throw err;
      // The replica went away under the read: left out until a look finds it again.
      replica.reachable = false;
      replica.reason = err.message;
      dbReads.inc({ target: 'primary' });
      return read(this.primary);
    }
  }

  wrote(writer: string): void {
    const at = Date.now();
    this.marks.set(writer, at);
    if (this.marks.size > 10_000) this.forgetOld(at);
    void this.shared?.mark(writer, at, this.o.maxLagMs + CLOCK_MARGIN_MS).catch(() => undefined);
  }

  state(): { status: 'ok' | 'degraded'; replicas: ReplicaState[] } {
    const now = Date.now();
    const replicas = this.replicas.map((r): ReplicaState => {
      if (!r.reachable) return { replica: r.name, status: 'unreachable', reason: r.reason };
      const lagSeconds = r.currentAsOf === undefined ? undefined : Math.max(0, now - r.currentAsOf) / 1000;
      if (lagSeconds === undefined || lagSeconds * 1000 > this.o.maxLagMs) return { replica: r.name, status: 'lagging', lagSeconds, reason: `more than ${this.o.maxLagMs / 1000} s behind the primary: the primary serves its reads` };
      return { replica: r.name, status: 'ok', lagSeconds };
    });
    return { status: replicas.every((r) => r.status === 'ok') ? 'ok' : 'degraded', replicas };
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.polling?.catch(() => undefined);
    await Promise.all(this.replicas.map((r) => r.db.close().catch(() => undefined)));
  }

  /** One look: the primary's WAL position now, then how far each replica has replayed. */
  poll(): Promise<void> {
    this.polling ??= this.look().finally(() => (this.polling = undefined));
    return this.polling;
  }

  private async look(): Promise<void> {
    const at = Date.now();
    try {
      const { rows } = await this.primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      this.samples.push({ at, lsn: lsnValue(rows[0].lsn) });
    } catch {
      // Without the primary's position nothing new is known: the replicas age until it answers.
    }
    // Samples older than the allowed lag decide nothing (a replica that far behind serves nobody).
    while (this.samples.length > 1 && this.samples[1].at < at - this.o.maxLagMs - 1000) this.samples.shift();
    await Promise.all(
      this.replicas.map(async (r) => {
        try {
          const { rows } = await r.db.query<{ lsn: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS lsn');
          if (rows[0].lsn === null) throw new Error('not a streaming replica (pg_last_wal_replay_lsn is null: the server is not in recovery)');
          const replayed = lsnValue(rows[0].lsn);
          let sample: { at: number } | undefined;
          for (const s of this.samples) if (s.lsn <= replayed) sample = s;
          if (sample && (r.currentAsOf === undefined || sample.at > r.currentAsOf)) r.currentAsOf = sample.at;
          r.reachable = true;
          r.reason = undefined;
        } catch (err) {
          r.reachable = false;
          r.reason = (err as Error).message;
        }
        replicaLag.set({ replica: r.name }, r.reachable && r.currentAsOf !== undefined ? Math.max(0, Date.now() - r.currentAsOf) / 1000 : -1);
      }),
    );
  }

  /** A replica current past the reader's last write and within the allowed lag, in turn; none: the primary. */
  private async replicaFor(reader: string): Promise<Replica | undefined> {
    const now = Date.now();
    let since = now - this.o.maxLagMs;
    // This process's mark covers its own writes at once; the shared one those of the other replicas
    // (and answers "just now" when it cannot be asked: the primary then serves).
    const own = this.marks.get(reader) ?? Number.NEGATIVE_INFINITY;
    const shared = this.shared ? ((await this.shared.lastWrite(reader).catch(() => now)) ?? Number.NEGATIVE_INFINITY) : Number.NEGATIVE_INFINITY;
    since = Math.max(since, Math.max(own, shared) + CLOCK_MARGIN_MS);
    const fit = this.replicas.filter((r) => r.reachable && r.currentAsOf !== undefined && r.currentAsOf >= since);
    if (fit.length === 0) return undefined;
    this.turn = (this.turn + 1) % fit.length;
    return fit[this.turn];
  }

  private forgetOld(now: number): void {
    for (const [writer, at] of this.marks) if (at < now - this.o.maxLagMs - CLOCK_MARGIN_MS) this.marks.delete(writer);
  }
}
