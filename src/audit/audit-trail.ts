import os from 'node:os';
import type { AppContext } from '../context';
import type { Db, WriteInterceptor } from '../store';
import { RESOURCE_TYPES } from '../store';
import { PipelinedCommit } from '../server-lib/group-commit';
import { auditEvents, auditFailures, auditWriteSeconds } from '../server-lib/metrics';
import type { AuditSigner, RefusedRequest, SecurityAudit, SecurityEvent } from '../server-lib/audit-port';
import type { AuditAction, AuditRecord } from './balp';
import { appendAfter, chainNumbers, ensurePartition, insertUnlinked, linkPending, readHead, storedRecord, unlinkedInsert, type KnownHead, type StoredAudit } from './audit-store';
import { makeCheckpoint, purgeExpired } from './checkpoint';
import { currentFrame } from './scope';
import { patientsOf } from './patients';
import crypto from 'node:crypto';

/** Batches of reads' AuditEvents in flight at once per process, each on a chain of its own (fewer than the chains). */
const PARALLEL_APPENDS = 4;
/** How often each replica links rows left unlinked (a write whose process stopped before linking it) and checks partitions. */
const LINK_INTERVAL_MS = 5_000;
/** Signed checkpoints of the chain heads: hourly, and at shutdown. */
const CHECKPOINT_INTERVAL_MS = 3_600_000;
/** The retention purge looks daily; the first look a minute after start. */
const PURGE_INTERVAL_MS = 86_400_000;
const PURGE_FIRST_MS = 60_000;

/** An access whose AuditEvent could not be stored (AUDIT_MODE=sync): the access is refused. */
export class AuditUnavailable extends Error {
  constructor(cause: unknown) {
    super(`the audit trail cannot be written: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'AuditUnavailable';
  }
}

/**
 * The audit trail of one application: it stores AuditEvents (a write's in the write's
 * transaction, everything else through a group commit), links them into hash chains, signs
 * checkpoints of the chain heads and purges what is past AUDIT_RETENTION_DAYS.
 */
export class AuditTrail implements SecurityAudit {
  readonly mode: 'sync' | 'buffered' | 'off';
  /** `source.observer` of every AuditEvent: this instance. */
  readonly source: string;
  private readonly buffer: PipelinedCommit<StoredAudit, undefined>;
  private readonly partitionsMade = new Set<string>();
  /** Partitions made inside a transaction not yet committed. */
  private readonly partitionsIn = new WeakMap<Db, Set<string>>();
  /** The chains, the one this process appends reads to, and their heads as it last moved them. */
  private chains?: { numbers: number[]; preferred: number };
  private readonly heads = new Map<number, KnownHead>();
  /** Chains a batch of this process is appending to now. */
  private readonly appending = new Set<number>();
  /** The partitions made when the application is composed (`prepare`). */
  private preparing?: Promise<void>;
  private linking?: Promise<void>;
  private linkAgain = false;
  private timers: NodeJS.Timeout[] = [];
  /** The last failure to store or link, named by `/readyz` while the audit tables do not answer. */
  private lastFailure?: string;

  constructor(
    private readonly ctx: AppContext,
    /** Signs checkpoints; none (a tool without the guard's key): no checkpoints. */
    private readonly signer?: AuditSigner,
  ) {
    this.mode = ctx.config.auditMode;
    this.source = `Terminus ${ctx.config.publicUrl} on ${os.hostname()}`;
    // Each batch in flight appends to a chain of its own: four commits' waits overlap.
    this.buffer = new PipelinedCommit(async (rows) => {
      await this.partitionsFor(rows);
      await this.append(rows);
      return rows.map(() => undefined);
    }, PARALLEL_APPENDS);
  }

  get enabled(): boolean {
    return this.mode !== 'off';
  }

  /** A new record's identity and time, and this instance as its source. */
  newRecord(fields: Omit<AuditRecord, 'id' | 'recorded' | 'source'>): AuditRecord {
    const recorded = this.ctx.now();
    return { id: timeOrderedUuid(recorded), recorded, source: this.source, ...fields };
  }

  /**
   * Stores AuditEvents outside any write (reads, searches, refusals, security events) through the
   * group commit: with AUDIT_MODE=sync the promise settles once they are stored and rejects with
   * AuditUnavailable when they cannot be; buffered, it settles at once.
   */
  async record(records: AuditRecord[]): Promise<void> {
    if (!this.enabled || records.length === 0) return;
    const started = process.hrtime.bigint();
    // One record (an answer without patients, most of them): its own promise, no Promise.all.
    const submitted = records.length === 1 ? this.buffer.submit(storedRecord(records[0])) : Promise.all(records.map((r) => this.buffer.submit(storedRecord(r))));
    const stored = submitted.then(
      () => {
        auditWriteSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
        for (const r of records) auditEvents.inc({ kind: r.kind, outcome: r.outcome });
        this.lastFailure = undefined;
      },
      (err: unknown) => {
        this.failed('store', err);
        throw new AuditUnavailable(err);
      },
    );
    if (this.mode === 'sync') return stored;
    stored.catch(() => undefined); // counted and logged in failed()
  }

  /**
   * Stores a write's AuditEvent in the write's transaction (it commits or rolls back with the
   * write); it is linked into a chain after the commit.
   */
  async recordInTransaction(tx: Db, record: AuditRecord): Promise<void> {
    if (!this.enabled) return;
    await this.partitionFor(tx, record.recorded);
    await insertUnlinked(tx, [storedRecord(record)]);
    this.linkAfterCommit(tx, [record]);
  }

  /**
   * The write observer composed into the repository: each write made while an interaction is
   * handled (a request, a Bundle entry, a job) stores its AuditEvent in the write's own statement.
   * The server's own bookkeeping (`system`) and imports are not accesses.
   */
  writeObserver(): WriteInterceptor {
    const recorded = (event: { origin: string }) => (this.enabled && event.origin !== 'system' && event.origin !== 'import' ? currentFrame() : undefined);
    return {
      name: 'audit',
      types: RESOURCE_TYPES,
      // The month's partition must exist before the write's statement stores into it.
      beforeWrite: async (event) => {
        if (recorded(event)) await this.partitionFor(event.repo.db, this.ctx.now());
      },
      alongWrite: (event) => {
        const frame = recorded(event);
        if (!frame) return undefined;
        frame.writes++;
        const action: AuditAction = event.interaction === 'create' ? 'C' : event.interaction === 'delete' ? 'D' : 'U';
        const reference = `${event.type}/${event.id}/_history/${event.versionId}`;
        const patients = patientsOf(event.resource);
        const base = { kind: 'rest' as const, subtype: event.interaction, operation: frame.operation, action, outcome: '0' as const, parties: frame.request.parties, requestId: frame.request.requestId, traceId: frame.request.traceId, entities: [reference] };
        // BALP Patient variants name one patient each: an appointment of two patients yields two events.
        const records = patients.length === 0 ? [this.newRecord(base)] : patients.map((patient) => this.newRecord({ ...base, patient }));
        this.linkAfterCommit(event.repo.db, records);
        const { sql, params } = unlinkedInsert(records.map((r) => storedRecord(r)));
        return { statements: [sql], params };
      },
    };
  }

  async security(event: SecurityEvent): Promise<void> {
    await this.record([
      this.newRecord({
        kind: 'security',
        subtype: event.code,
        action: 'E',
        outcome: event.failure ? '4' : '0',
        outcomeDesc: event.failure,
        parties: event.parties,
        entities: [],
        requestId: event.requestId,
      }),
    ]).catch((err: unknown) => this.ctx.logger.error({ err, code: event.code }, 'security event not audited'));
  }

  async refused(request: RefusedRequest): Promise<void> {
    await this.record([
      this.newRecord({
        kind: 'rest',
        subtype: restfulInteractionOf(request.method, request.url),
        action: request.method === 'GET' || request.method === 'HEAD' ? 'R' : request.method === 'DELETE' ? 'D' : request.method === 'POST' ? 'C' : 'U',
        outcome: request.status >= 500 ? '8' : '4',
        outcomeDesc: `${request.status} ${request.failure}`,
        parties: request.parties,
        entities: [],
        query: `${request.method} ${request.url}`,
        requestId: request.requestId,
      }),
    ]).catch((err: unknown) => this.ctx.logger.error({ err, url: request.url }, 'refused request not audited'));
  }

  /**
   * Makes this month's partition and the next two now, so the first access does not wait for one
   * (the HTTP application calls it when it is composed; `start` again).
   */
  prepare(): Promise<void> {
    if (this.enabled) this.preparing ??= this.partitionsAhead().catch((err: unknown) => this.failed('store', err));
    return this.preparing ?? Promise.resolve();
  }

  /** Background work: partitions ahead, linking, hourly checkpoints, the retention purge. */
  async start(): Promise<void> {
    if (!this.enabled || this.timers.length > 0) return;
    await this.partitionsAhead();
    const every = (ms: number, fn: () => Promise<unknown>, stage: string) => {
      const t = setInterval(() => void fn().catch((err: unknown) => this.failed(stage, err)), ms);
      t.unref();
      this.timers.push(t);
    };
    every(LINK_INTERVAL_MS, async () => {
      await this.partitionsAhead();
      this.nudge();
    }, 'link');
    every(CHECKPOINT_INTERVAL_MS, () => this.checkpoint(), 'checkpoint');
    every(PURGE_INTERVAL_MS, () => this.purge(), 'purge');
    const first = setTimeout(() => void this.purge().catch((err: unknown) => this.failed('purge', err)), PURGE_FIRST_MS);
    first.unref();
    this.timers.push(first);
    this.nudge();
  }

  /** Stops the timers, links what is pending and signs a last checkpoint. */
  async stop(): Promise<void> {
    await this.preparing;
    for (const t of this.timers) clearTimeout(t);
    const started = this.timers.length > 0;
    this.timers = [];
    if (!started) return;
    try {
      await this.checkpoint();
    } catch (err) {
      this.failed('checkpoint', err);
    }
  }

  /**
   * Appends a batch of reads' AuditEvents after the head of this process's chain in one statement
   * (`appendAfter`); when another linker moved that head meanwhile, it reads the head again, and
   * after a second miss moves on to the next chain.
   */
  private async append(rows: StoredAudit[]): Promise<void> {
    if (!this.chains) {
      const numbers = await chainNumbers(this.ctx.db);
      this.chains ??= { numbers, preferred: Math.floor(Math.random() * numbers.length) };
    }
    const { numbers } = this.chains;
    for (let attempt = 0; attempt < 2 * numbers.length; attempt++) {
      const index = this.freeChain(this.chains.preferred + Math.floor(attempt / 2));
      const chain = numbers[index];
      this.appending.add(chain);
      let moved: KnownHead | undefined;
      try {
        moved = await appendAfter(this.ctx.db, chain, this.heads.get(chain) ?? (await readHead(this.ctx.db, chain)), rows);
      } finally {
        this.appending.delete(chain);
        if (!moved) this.heads.delete(chain);
      }
      if (moved) {
        this.heads.set(chain, moved);
        if (attempt > 0) this.chains.preferred = index;
        return;
      }
    }
    throw new Error('every audit chain moved under each attempt to link into it (too many linkers at once)');
  }

  /** The first chain from `from` on that no batch of this process is appending to. */
  private freeChain(from: number): number {
    const { numbers } = this.chains!;
    for (let k = 0; k < numbers.length; k++) {
      const i = (from + k) % numbers.length;
      if (!this.appending.has(numbers[i])) return i;
    }
    return from % numbers.length;
  }

  /** Links everything pending, then signs the chain heads (docs/architecture.md, Audit trail). */
  async checkpoint(): Promise<void> {
    await this.linkAll();
    if (this.signer) await makeCheckpoint(this.ctx.db, this.signer, this.ctx.now());
  }

  /** Drops the months past AUDIT_RETENTION_DAYS; returns the partitions dropped. */
  async purge(): Promise<string[]> {
    await this.linkAll();
    const cutoff = new Date(this.ctx.now().getTime() - this.ctx.config.auditRetentionDays * 86_400_000);
    return purgeExpired(this.ctx.db, this.signer, cutoff, this.ctx.now());
  }

  /** Links every row stored unlinked (writes' AuditEvents) now. */
  async linkAll(): Promise<void> {
    while (this.linking) await this.linking;
    while ((await linkPending(this.ctx.db, 1000, this.appendChain())) > 0);
  }

  /**
   * `/readyz`: whether AuditEvents can be stored now (the audit tables answer). `unavailable`
   * with AUDIT_MODE=sync (accesses are refused meanwhile), `degraded` when buffered; the last
   * failure is named.
   */
  async readiness(): Promise<string | { status: string; mode: string; failure: string }> {
    if (!this.enabled) return 'off';
    try {
      await this.ctx.db.query('SELECT 1 FROM audit_event WHERE false');
      await this.ctx.db.query('SELECT 1 FROM audit_chain LIMIT 1');
      return 'ok';
    } catch (err) {
      const failure = this.lastFailure ?? (err instanceof Error ? err.message : String(err));
      return { status: this.mode === 'sync' ? 'unavailable' : 'degraded', mode: this.mode, failure };
    }
  }

  /** Links the rows of committed writes soon; calls that come while it runs make it run once more. */
  private nudge(): void {
    if (this.linking) {
      this.linkAgain = true;
      return;
    }
    this.linking = (async () => {
      do {
        this.linkAgain = false;
        while ((await linkPending(this.ctx.db, 1000, this.appendChain())) > 0);
      } while (this.linkAgain);
    })()
      .catch((err: unknown) => this.failed('link', err))
      .finally(() => {
        this.linking = undefined;
      });
  }

  /** Once the transaction that stored `records` unlinked has committed: count them and link them. */
  private linkAfterCommit(tx: Db, records: AuditRecord[]): void {
    tx.afterCommit(() => {
      for (const r of records) auditEvents.inc({ kind: r.kind, outcome: r.outcome });
      this.nudge();
    });
  }

  /** The chain reads are appended to (writes are linked into the others, so the two rarely meet). */
  private appendChain(): number {
    return this.chains ? this.chains.numbers[this.chains.preferred] : 0;
  }

  private failed(stage: string, err: unknown): void {
    auditFailures.inc({ stage });
    const message = err instanceof Error ? err.message : String(err);
    this.lastFailure = `${stage}: ${message}`;
    this.ctx.logger.error({ err: message, stage }, 'audit trail: failed');
  }

  /** This month's partition and the next two, made ahead so no access waits for one. */
  private async partitionsAhead(): Promise<void> {
    const now = this.ctx.now();
    for (let i = 0; i < 3; i++) await this.partitionFor(this.ctx.db, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + i, 1)));
  }

  private async partitionsFor(rows: StoredAudit[]): Promise<void> {
    for (const row of rows) await this.partitionFor(this.ctx.db, row.recorded);
  }

  private async partitionFor(db: Db, t: Date): Promise<void> {
    const key = `${t.getUTCFullYear()}-${t.getUTCMonth()}`;
    if (this.partitionsMade.has(key) || this.partitionsIn.get(db)?.has(key)) return;
    await ensurePartition(db, t);
    // Inside a write's transaction the partition exists for the rest of it, and for everyone once it commits.
    if (db.inTransaction) this.partitionsIn.set(db, new Set([...(this.partitionsIn.get(db) ?? []), key]));
    db.afterCommit(() => this.partitionsMade.add(key));
  }
}

/**
 * A UUIDv7 (RFC 9562) of the record's time: the milliseconds since 1970 in its first 48 bits, the
 * rest random. Rows inserted in time order land at the end of the primary key's index (id,
 * recorded) instead of on a random page of it: less work per stored event.
 */
export function timeOrderedUuid(at: Date): string {
  const random = crypto.randomUUID(); // xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx, V the RFC variant already
  const ms = Math.max(0, Math.min(at.getTime(), 0xffffffffffff)).toString(16).padStart(12, '0');
  return `${ms.slice(0, 8)}-${ms.slice(8)}-7${random.slice(15)}`;
}

/** The restful-interaction code of a request the FHIR layer did not route (a refusal at the enforcement point). */
function restfulInteractionOf(method: string, url: string): string {
  const path = url.split('?')[0].replace(/^\/fhir\/?/, '').split('/').filter(Boolean);
  if (path.some((p) => p.startsWith('$'))) return 'operation';
  if (path.length === 0) return method === 'POST' ? 'transaction' : 'capabilities';
  if (path.length === 1 || path[1] === '_search') return method === 'POST' && path[1] !== '_search' ? 'create' : 'search-type';
  if (path[2] === '_history') return path.length > 3 ? 'vread' : 'history-instance';
  return { GET: 'read', HEAD: 'read', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[method] ?? 'read';
}
