import type { Db } from '../store';
import { bytes } from './audit-store';

/** Rows read per round trip. */
const PAGE = 1000;

/**
 * The AuditEvents recorded in [since, until), oldest first, each as its stored JSON (one NDJSON
 * line), and for the chain proof each one's place in its chain: position, previous link and link.
 */
export async function exportAuditEvents(
  db: Db,
  range: { since: Date; until?: Date },
  write: (line: string, proof: { id: string; chain: number | null; seq: string | null; prev: string | null; hash: string | null }) => Promise<void>,
): Promise<number> {
  let after: { recorded: Date; id: string } | undefined;
  let n = 0;
  for (;;) {
    const params: unknown[] = [range.since];
    const conditions = ['recorded >= $1'];
    if (range.until) conditions.push(`recorded < $${params.push(range.until)}`);
    if (after) conditions.push(`(recorded, id) > ($${params.push(after.recorded)}, $${params.push(after.id)}::uuid)`);
    const { rows } = await db.query<{ id: string; recorded: Date; content: string; chain: number | null; seq: string | null; prev_hash: Buffer | null; hash: Buffer | null }>(
      `SELECT id, recorded, content, chain, seq::text AS seq, prev_hash, hash FROM audit_event WHERE ${conditions.join(' AND ')} ORDER BY recorded, id LIMIT ${PAGE}`,
      params,
    );
    for (const r of rows) {
      await write(r.content, { id: r.id, chain: r.chain, seq: r.seq, prev: r.prev_hash ? bytes(r.prev_hash).toString('hex') : null, hash: r.hash ? bytes(r.hash).toString('hex') : null });
      n++;
    }
    if (rows.length < PAGE) return n;
    after = { recorded: rows[rows.length - 1].recorded, id: rows[rows.length - 1].id };
  }
}
