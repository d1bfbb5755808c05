import type { Db } from '../store';

export type JobState = 'queued' | 'running' | 'completed' | 'cancelled';

export interface JobResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface JobRecord {
  id: string;
  kind: string;
  owner: string | null;
  state: JobState;
  payload: unknown;
  attempts: number;
  maxAttempts: number;
  result?: JobResult;
  expiresAt: Date;
}

/** Results are kept this long after the request (24 h), then polls answer 404. */
const RETENTION_MS = 24 * 60 * 60 * 1000;
/**
 * A running job whose lease ran out was abandoned by a crashed worker: run it again. The worker
 * renews the lease every third of it while the job runs, so the lease bounds the takeover after a
 * crash (under 10 s with the sweep, docs/requirements.md#robustness-aims), not the length of a job.
 */
export const LEASE_MS = 6000;

interface Row {
  id: string;
  kind: string;
  owner: string | null;
  state: JobState;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  result_status: number | null;
  result_body: unknown;
  result_headers: Record<string, string> | null;
  expires_at: Date | string;
}

const COLUMNS = 'id, kind, owner, state, payload, attempts, max_attempts, result_status, result_body, result_headers, expires_at';

function toRecord(r: Row): JobRecord {
  return {
    id: r.id,
    kind: r.kind,
    owner: r.owner,
    state: r.state,
    payload: r.payload,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    result: r.result_status === null ? undefined : { status: r.result_status, body: r.result_body ?? undefined, headers: r.result_headers ?? undefined },
    expiresAt: new Date(r.expires_at),
  };
}

export async function insertJob(db: Db, job: { id: string; kind: string; owner: string | null; payload: unknown; maxAttempts: number; now: Date }): Promise<void> {
  await db.query(
    `INSERT INTO async_job (id, kind, owner, state, payload, max_attempts, created_at, updated_at, expires_at)
     VALUES ($1, $2, $3, 'queued', $4, $5, $6, $6, $7)`,
    [job.id, job.kind, job.owner, JSON.stringify(job.payload), job.maxAttempts, job.now.toISOString(), new Date(job.now.getTime() + RETENTION_MS).toISOString()],
  );
}

export async function readJob(db: Db, id: string, opts: { forUpdate?: boolean } = {}): Promise<JobRecord | undefined> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM async_job WHERE id = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [id]);
  return rows[0] && toRecord(rows[0]);
}

/** Marks a queued (or abandoned running) job as running for one more attempt; undefined: nothing to run. */
export async function claimJob(db: Db, id: string, now: Date): Promise<JobRecord | undefined> {
  const { rows } = await db.query<Row>(
    `UPDATE async_job SET state = 'running', attempts = attempts + 1, lease_until = $2, updated_at = $3
      WHERE id = $1 AND state IN ('queued', 'running') AND expires_at > $3
      RETURNING ${COLUMNS}`,
    [id, new Date(now.getTime() + LEASE_MS).toISOString(), now.toISOString()],
  );
  return rows[0] && toRecord(rows[0]);
}

/** Extends the lease of a job still running. */
export async function renewJobLease(db: Db, id: string, now: Date): Promise<void> {
  await db.query(`UPDATE async_job SET lease_until = $2 WHERE id = $1 AND state = 'running'`, [id, new Date(now.getTime() + LEASE_MS).toISOString()]);
}

export async function completeJob(db: Db, id: string, result: JobResult, now: Date): Promise<void> {
  await db.query(
    `UPDATE async_job SET state = 'completed', result_status = $2, result_body = $3, result_headers = $4, completed_at = $5, updated_at = $5, lease_until = NULL
      WHERE id = $1 AND state = 'running'`,
    [id, result.status, result.body === undefined ? null : JSON.stringify(result.body), result.headers ? JSON.stringify(result.headers) : null, now.toISOString()],
  );
}

/** Back to the queue for a retry (the attempt failed for a transient reason). */
export async function requeueJob(db: Db, id: string, now: Date): Promise<void> {
  await db.query(`UPDATE async_job SET state = 'queued', lease_until = NULL, updated_at = $2 WHERE id = $1 AND state = 'running'`, [id, now.toISOString()]);
}

/** Cancels a queued job or discards a finished one's result; a running job cannot be cancelled. */
export async function cancelJob(db: Db, id: string, now: Date): Promise<JobState | undefined> {
  return db.transaction(async (tx) => {
    const job = await readJob(tx, id, { forUpdate: true });
    if (!job) return undefined;
    if (job.state === 'queued' || job.state === 'completed') {
      await tx.query(`UPDATE async_job SET state = 'cancelled', updated_at = $2 WHERE id = $1`, [id, now.toISOString()]);
    }
    return job.state;
  });
}

/** Jobs a crashed worker left behind: queued for a while, or running past their lease. */
export async function abandonedJobs(db: Db, now: Date, queuedForMs: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM async_job
      WHERE expires_at > $1
        AND ((state = 'queued' AND updated_at < $2) OR (state = 'running' AND lease_until < $1))
      ORDER BY created_at LIMIT 100`,
    [now.toISOString(), new Date(now.getTime() - queuedForMs).toISOString()],
  );
  return rows.map((r) => r.id);
}

export async function purgeExpired(db: Db, now: Date): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM async_job WHERE expires_at <= $1', [now.toISOString()]);
  return rowCount;
}

export async function storeId(db: Db): Promise<string> {
  const { rows } = await db.query<{ store_id: string }>('SELECT store_id FROM job_store_identity');
  return rows[0]?.store_id ?? 'default';
}
