import type { AuditEvent } from '@medplum/fhirtypes';
import type { Db } from '../store';
import type { AuditSigner } from '../server-lib/audit-port';
import { auditColumns, GENESIS, linkHash, type AuditColumns } from './chain';
import { checkpointHash, type CheckpointStatement } from './checkpoint';
import { bytes, checkpoints } from './audit-store';
import { storedEvent } from './stored-form';

/** Rows read per round trip while walking a chain. */
const PAGE = 2000;
/** A write's AuditEvent is linked moments after its commit; one older than a checkpoint by this much and still unlinked was put there. */
const LINK_GRACE_MS = 60_000;

export type VerifyResult = { ok: true; count: number } | { ok: false; count: number; problem: string };

interface Problem {
  /** When the broken row was recorded (the first problem in time is the one reported). */
  at: number;
  text: string;
}

/** A linked row with the columns its search reads (verify derives them again from its content). */
interface Row extends AuditColumns {
  id: string;
  recorded: Date;
  content: string;
  chain: number;
  seq: string;
  prev_hash: Buffer;
  hash: Buffer;
}

/**
 * Walks the checkpoints and every chain: each checkpoint must carry the guard's signature and
 * name the one before it; each row must follow the one before it (position and link), its link
 * must match its content, and its search columns must be the ones its content gives; every head a
 * checkpoint names must still be there. The first problem in time is named.
 */
export async function verifyAuditTrail(db: Db, signer: AuditSigner, opts: { since?: Date } = {}): Promise<VerifyResult> {
  const problems: Problem[] = [];
  const statements = await checkedCheckpoints(db, signer, problems);
  const latest = statements.at(-1);
  const named = new Map<string, { hash: string; madeAt: string }>();
  for (const s of statements) for (const h of s.heads) named.set(`${h.chain}:${h.seq}`, { hash: h.hash, madeAt: s.made_at });
  const { rows: chains } = await db.query<{ chain: number }>('SELECT chain FROM audit_chain ORDER BY chain');
  let count = 0;
  for (const { chain } of chains) {
    const walked = await walkChain(db, chain, { since: opts.since, start: latest?.starts.find((s) => s.chain === chain), named });
    count += walked.count;
    if (walked.problem) problems.push(walked.problem);
    const head = latest?.heads.find((h) => h.chain === chain);
    if (!walked.problem && head && BigInt(head.seq) > walked.lastSeq && (walked.count > 0 || !opts.since)) {
      problems.push({ at: Date.parse(latest!.made_at), text: `removed: the checkpoint of ${latest!.made_at} names chain ${chain} up to position ${head.seq}, the chain ends at ${walked.lastSeq}${walked.lastId ? ` (audit event ${walked.lastId})` : ''}` });
    }
  }
  const strays = await db.query<{ id: string; recorded: Date; chain: number }>('SELECT id, recorded, chain FROM audit_event WHERE chain IS NOT NULL AND chain <> ALL($1::int[]) LIMIT 1', [chains.map((c) => c.chain)]);
  for (const r of strays.rows) problems.push({ at: r.recorded.getTime(), text: `inserted: audit event ${r.id} names chain ${r.chain}, which does not exist` });
  if (latest) {
    const before = new Date(Date.parse(latest.made_at) - LINK_GRACE_MS);
    const unlinked = await db.query<{ id: string; recorded: Date }>('SELECT id, recorded FROM audit_event WHERE chain IS NULL AND recorded < $1 ORDER BY recorded LIMIT 1', [before]);
    for (const r of unlinked.rows) problems.push({ at: r.recorded.getTime(), text: `inserted: audit event ${r.id} (recorded ${r.recorded.toISOString()}) is in no chain, though older than the checkpoint of ${latest.made_at}` });
  }
  if (problems.length === 0) return { ok: true, count };
  problems.sort((a, b) => a.at - b.at);
  return { ok: false, count, problem: problems[0].text };
}

/** The checkpoints' statements, each checked: the guard's signature, and the link to the one before. */
async function checkedCheckpoints(db: Db, signer: AuditSigner, problems: Problem[]): Promise<CheckpointStatement[]> {
  const out: CheckpointStatement[] = [];
  let prev: string | null = null;
  for (const cp of await checkpoints(db)) {
    let statement: CheckpointStatement;
    try {
      statement = (await signer.verify(cp.jws)) as unknown as CheckpointStatement;
    } catch (err) {
      problems.push({ at: -Infinity, text: `altered: checkpoint ${cp.id} (${cp.made_at.toISOString()}) does not carry the guard's signature: ${(err as Error).message}` });
      return out;
    }
    if (statement.prev !== prev) {
      problems.push({ at: -Infinity, text: `removed or inserted: checkpoint ${cp.id} (${statement.made_at}) does not follow the checkpoint before it` });
      return out;
    }
    prev = checkpointHash(cp.jws);
    out.push(statement);
  }
  return out;
}

async function walkChain(
  db: Db,
  chain: number,
  o: { since?: Date; start?: CheckpointStatement['starts'][number]; named: Map<string, { hash: string; madeAt: string }> },
): Promise<{ count: number; lastSeq: bigint; lastId?: string; problem?: Problem }> {
  let expected: bigint | undefined = o.since ? undefined : o.start ? BigInt(o.start.seq) : 1n;
  let prev: Buffer | undefined = o.since ? undefined : o.start ? Buffer.from(o.start.prev, 'hex') : GENESIS;
  let lastSeq = expected !== undefined ? expected - 1n : 0n;
  let lastId: string | undefined;
  let count = 0;
  let after = '-1';
  for (;;) {
    const { rows } = await db.query<Row>(
      // (e.seq: the column, not the text alias the rows carry it as)
      `SELECT id, recorded, content, chain, e.seq::text AS seq, prev_hash, hash, type, subtypes, action, outcome, agents, entities, patients
         FROM audit_event e WHERE e.chain = $1 AND e.seq > $2 ${o.since ? 'AND e.recorded >= $4' : ''} ORDER BY e.seq, e.id LIMIT $3`,
      o.since ? [chain, after, PAGE, o.since] : [chain, after, PAGE],
    );
    for (const raw of rows) {
      const row = { ...raw, prev_hash: bytes(raw.prev_hash), hash: bytes(raw.hash) };
      const seq = BigInt(row.seq);
      const at = row.recorded.getTime();
      if (expected === undefined) {
        // --since: the first row on or after the date is taken as it is; the walk checks from there.
        expected = seq;
        prev = row.prev_hash;
      }
      if (seq < expected) return { count, lastSeq, lastId, problem: { at, text: `inserted: audit event ${row.id} takes position ${seq} of chain ${chain}, which audit event ${lastId} holds` } };
      if (seq > expected) return { count, lastSeq, lastId, problem: { at, text: `removed: chain ${chain} has no audit event at position ${expected}${lastId ? ` (after audit event ${lastId})` : ''}; the next is audit event ${row.id}` } };
      if (!row.prev_hash.equals(prev!)) return { count, lastSeq, lastId, problem: { at, text: `inserted or altered: audit event ${row.id} (chain ${chain}, position ${seq}) does not follow ${lastId ? `audit event ${lastId}` : 'the chain start'}` } };
      const wrong = alteration(row, chain, seq, prev!);
      if (wrong) return { count, lastSeq, lastId, problem: { at, text: `${wrong.kind}: audit event ${row.id} (chain ${chain}, position ${seq}, recorded ${row.recorded.toISOString()}): ${wrong.reason}` } };
      const n = o.named.get(`${chain}:${seq}`);
      if (n && n.hash !== row.hash.toString('hex')) return { count, lastSeq, lastId, problem: { at, text: `altered: audit event ${row.id} (chain ${chain}, position ${seq}) is not the one the checkpoint of ${n.madeAt} names` } };
      prev = row.hash;
      lastSeq = seq;
      lastId = row.id;
      expected = seq + 1n;
      count++;
    }
    if (rows.length < PAGE) return { count, lastSeq, lastId };
    after = rows[rows.length - 1].seq;
  }
}

/** What is wrong with a row's content or columns, if anything. */
function alteration(row: Row, chain: number, seq: bigint, prev: Buffer): { kind: 'altered' | 'inserted'; reason: string } | undefined {
  let event: AuditEvent | undefined;
  try {
    event = storedEvent(row.content);
  } catch {
    event = undefined;
  }
  // A row carrying another AuditEvent's content and link is a copy put into the chain.
  if (event && event.id !== row.id) return { kind: 'inserted', reason: `it carries the content of audit event ${event.id}` };
  if (!linkHash(chain, seq, prev, row.content).equals(row.hash)) return { kind: 'altered', reason: 'its content does not match its link' };
  if (!event) return { kind: 'altered', reason: 'its content is not an audit record' };
  if (Date.parse(event.recorded) !== row.recorded.getTime()) return { kind: 'altered', reason: 'its time differs from its content' };
  const c = auditColumns(event);
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().every((v, i) => v === [...b].sort()[i]);
  if (c.type !== row.type || c.action !== row.action || c.outcome !== row.outcome || !same(c.subtypes, row.subtypes) || !same(c.agents, row.agents) || !same(c.entities, row.entities) || !same(c.patients, row.patients)) {
    return { kind: 'altered', reason: 'its search columns differ from its content' };
  }
  return undefined;
}
