import type { Db } from '../store';
import { bytes } from './audit-store';
import { storedEventJson } from './stored-form';

/** Rows read per round trip. */
const PAGE = 1000;

/** An AuditEvent's place in its chain, and the stored text its link hashes (`stored-form.ts`) when that is not the NDJSON line itself. */
export interface ChainPlace {
  id: string;
  chain: number | null;
  seq: string | null;
  prev: string | null;
  hash: string | null;
  stored?: string;
}

/**
 * The AuditEvents recorded in [since, until), oldest first, each as its AuditEvent's JSON (one
 * NDJSON line), and for the chain proof each one's place in its chain: position, previous link,
 * link, and the stored record the link hashes (the line is rendered from it).
 */
export async function exportAuditEvents(
  db: Db,
  range: { since: Date; until?: Date },
  write: (line: string, proof: ChainPlace) => Promise<void>,
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
      const line = storedEventJson(r.content);
      const place: ChainPlace = { id: r.id, chain: r.chain, seq: r.seq, prev: r.prev_hash ? bytes(r.prev_hash).toString('hex') : null, hash: r.hash ? bytes(r.hash).toString('hex') : null };
      if (line !== r.content) place.stored = r.content;
      await write(line, place);
      n++;
    }
    if (rows.length < PAGE) return n;
    after = { recorded: rows[rows.length - 1].recorded, id: rows[rows.length - 1].id };
  }
}
