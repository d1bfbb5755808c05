import crypto from 'node:crypto';
import { decodeJwt } from 'jose';
import type { Db } from '../store';
import type { AuditSigner } from '../server-lib/audit-port';
import { bytes, dropPartition, insertCheckpoint, lastCheckpoint, lockedHeads, partitions } from './audit-store';

/**
 * What a checkpoint states, signed with the guard's key: every chain's head (its last linked row's
 * position and link), where each chain begins (after a purge; absent: at its first position), and
 * the SHA-256 of the previous checkpoint's JWS, so checkpoints form a chain of their own.
 */
export interface CheckpointStatement {
  made_at: string;
  heads: { chain: number; seq: string; hash: string }[];
  starts: { chain: number; seq: string; prev: string }[];
  prev: string | null;
}

export function checkpointHash(jws: string): string {
  return crypto.createHash('sha256').update(jws, 'utf8').digest('hex');
}

/**
 * Signs the chain heads as they are now. The chains stay locked while it signs (nothing links in
 * between); checkpoint makers of two replicas take turns (an advisory lock of the transaction).
 */
export async function makeCheckpoint(db: Db, signer: AuditSigner, now: Date, starts?: CheckpointStatement['starts']): Promise<void> {
  // The key first: an embedded store has one connection, which the transaction below holds.
  if (!db.inTransaction) await signer.ready();
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.audit_checkpoint'))");
    const heads = await lockedHeads(tx);
    const last = await lastCheckpoint(tx);
    const carried = last ? (decodeJwt(last.jws) as unknown as CheckpointStatement).starts : [];
    const statement: CheckpointStatement = { made_at: now.toISOString(), heads, starts: starts ?? carried, prev: last ? checkpointHash(last.jws) : null };
    await insertCheckpoint(tx, now, await signer.sign(statement as unknown as Record<string, unknown>));
  });
}

/**
 * Drops every monthly partition that ended before `cutoff`, and states in a new checkpoint
 * where each chain now begins (its first row left), so `verify` tells a purge from a removal.
 * Without a signer (no guard key) nothing is dropped: the starts could not be stated.
 */
export async function purgeExpired(db: Db, signer: AuditSigner | undefined, cutoff: Date, now: Date): Promise<string[]> {
  if (!signer) return [];
  const expired = (await partitions(db)).filter((p) => p.to.getTime() <= cutoff.getTime());
  if (expired.length === 0) return [];
  await signer.ready();
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.audit_checkpoint'))");
    // The table first, then the chains: the order every linker takes them in (no deadlock). Accesses
    // wait for the purge's moment; it drops tables, it deletes no rows.
    await tx.query('LOCK TABLE audit_event IN ACCESS EXCLUSIVE MODE');
    const heads = await lockedHeads(tx);
    for (const p of expired) await dropPartition(tx, p.name);
    const starts: CheckpointStatement['starts'] = [];
    for (const head of heads) {
      const { rows } = await tx.query<{ seq: string; prev_hash: Buffer }>('SELECT e.seq::text AS seq, e.prev_hash FROM audit_event e WHERE e.chain = $1 ORDER BY e.seq LIMIT 1', [head.chain]);
      // A chain purged whole begins after its head: the next row linked into it.
      starts.push(rows[0] ? { chain: head.chain, seq: rows[0].seq, prev: bytes(rows[0].prev_hash).toString('hex') } : { chain: head.chain, seq: (BigInt(head.seq) + 1n).toString(), prev: head.hash });
    }
    await makeCheckpoint(tx, signer, now, starts);
  });
  return expired.map((p) => p.name);
}
