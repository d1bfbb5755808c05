import type { Db } from '../store';
import { auditColumns, linkHash, type AuditColumns } from './chain';
import { recordColumns, type AuditRecord } from './balp';
import { recordJson, storedEvent } from './stored-form';

/** A bytea column as a Buffer (pg gives a Buffer, PGlite a Uint8Array). */
export function bytes(value: Uint8Array): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

/** One AuditEvent as stored: its record's text exactly as hashed (`stored-form.ts`), and the columns derived from it. */
export interface StoredAudit {
  id: string;
  recorded: Date;
  content: string;
  columns?: AuditColumns;
}

/**
 * A record as stored: its text (`recordJson`) and the columns `auditColumns` derives from its
 * AuditEvent, read off the record without the AuditEvent in between.
 */
export function storedRecord(r: AuditRecord): StoredAudit {
  return { id: r.id, recorded: r.recorded, content: recordJson(r), columns: recordColumns(r) };
}

const COLUMNS = 'id, recorded, content, type, subtypes, action, outcome, agents, entities, patients';

function columnsOf(row: StoredAudit): unknown[] {
  const c = row.columns ?? auditColumns(storedEvent(row.content));
  return [row.id, row.recorded, row.content, c.type, c.subtypes, c.action, c.outcome, c.agents, c.entities, c.patients];
}


/** The monthly partition a time falls in (UTC). */
export function monthOf(t: Date): { name: string; from: string; to: string } {
  const y = t.getUTCFullYear();
  const m = t.getUTCMonth();
  const from = new Date(Date.UTC(y, m, 1));
  const to = new Date(Date.UTC(y, m + 1, 1));
  return { name: `audit_event_${y}_${String(m + 1).padStart(2, '0')}`, from: from.toISOString(), to: to.toISOString() };
}

/**
 * Makes the month's partition unless it exists. Two replicas making the same one serialise on an
 * advisory lock of the transaction, so the second finds it made.
 */
export async function ensurePartition(db: Db, t: Date): Promise<void> {
  const month = monthOf(t);
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.audit_event partitions'))");
    await tx.query(`CREATE TABLE IF NOT EXISTS ${month.name} PARTITION OF audit_event FOR VALUES FROM ('${month.from}') TO ('${month.to}')`);
  });
}

/** The partitions there are, oldest first, with the end of the month each holds. */
export async function partitions(db: Db): Promise<{ name: string; to: Date }[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'audit_event' ORDER BY c.relname`,
  );
  return rows.flatMap((r) => {
    const m = /^audit_event_(\d{4})_(\d{2})$/.exec(r.name);
    return m ? [{ name: r.name, to: new Date(Date.UTC(Number(m[1]), Number(m[2]), 1)) }] : [];
  });
}

export async function dropPartition(db: Db, name: string): Promise<void> {
  if (!/^audit_event_\d{4}_\d{2}$/.test(name)) throw new Error(`not an audit partition: ${name}`);
  await db.query(`DROP TABLE IF EXISTS ${name}`);
}

/**
 * The statement that stores AuditEvents not yet linked (a write's, inside its transaction;
 * `linkPending` links them), its parameters numbered from $1.
 */
export function unlinkedInsert(rows: StoredAudit[]): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const tuples = rows.map((row) => {
    const cols = columnsOf(row);
    const base = params.length;
    params.push(...cols);
    return `(${cols.map((_, i) => `$${base + i + 1}`).join(', ')})`;
  });
  return { sql: `INSERT INTO audit_event (${COLUMNS}) VALUES ${tuples.join(', ')}`, params };
}

export async function insertUnlinked(db: Db, rows: StoredAudit[]): Promise<void> {
  if (rows.length === 0) return;
  const { sql, params } = unlinkedInsert(rows);
  await db.query(sql, params);
}

interface ChainHead {
  chain: number;
  head_seq: string;
  head_hash: Buffer;
}

/**
 * A chain no other transaction is linking into now, locked for this one; `undefined` when all
 * are busy (the caller waits for one: `wait`).
 */
async function takeChain(tx: Db, wait: boolean, avoid = 0): Promise<ChainHead | undefined> {
  const { rows } = await tx.query<ChainHead>(
    `SELECT chain, head_seq::text AS head_seq, head_hash FROM audit_chain WHERE chain <> $1 ORDER BY random() LIMIT 1 FOR UPDATE${wait ? '' : ' SKIP LOCKED'}`,
    [avoid],
  );
  return rows[0] && { ...rows[0], head_hash: bytes(rows[0].head_hash) };
}

/** Links `rows` after the chain's head, in order; returns the columns to store and the new head. */
function linkAfter(head: ChainHead, rows: StoredAudit[]): { links: { seq: bigint; prev: Buffer; hash: Buffer }[]; seq: bigint; hash: Buffer } {
  let seq = BigInt(head.head_seq);
  let prev = head.head_hash;
  const links = rows.map((row) => {
    seq += 1n;
    const hash = linkHash(head.chain, seq, prev, row.content);
    const link = { seq, prev, hash };
    prev = hash;
    return link;
  });
  return { links, seq, hash: prev };
}

/** Where a chain ends, as one process last saw it. */
export interface KnownHead {
  seq: bigint;
  hash: Buffer;
}

/**
 * Stores AuditEvents linked after the chain's head in one statement, no transaction: the head
 * moves only if it is still `head` (a compare-and-set on audit_chain, whose row lock orders
 * concurrent writers), and the rows are inserted only if it moved. Returns the new head, or
 * `undefined` when another linker moved the head first (nothing was stored: read the head again).
 */
export async function appendAfter(db: Db, chain: number, head: KnownHead, rows: StoredAudit[]): Promise<KnownHead | undefined> {
  const { links, seq, hash } = linkAfter({ chain, head_seq: head.seq.toString(), head_hash: head.hash }, rows);
  // Each column of the rows as one array literal, written here (pg's writing of arrays escapes
  // every element; these are mostly codes and identifiers that need none).
  let ids = '';
  let recorded = '';
  let contents = '';
  let types = '';
  let subtypes = '';
  let actions = '';
  let outcomes = '';
  let agents = '';
  let entities = '';
  let patients = '';
  let hashes = '';
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const c = row.columns ?? auditColumns(storedEvent(row.content));
    const sep = i === 0 ? '' : ',';
    ids += sep + element(row.id);
    recorded += sep + row.recorded.toISOString();
    contents += (i === 0 ? '' : '\x1e') + row.content;
    types += sep + element(c.type);
    subtypes += sep + element(arrayLiteral(c.subtypes));
    actions += sep + (c.action === null ? 'NULL' : element(c.action));
    outcomes += sep + element(c.outcome);
    agents += sep + element(arrayLiteral(c.agents));
    entities += sep + element(arrayLiteral(c.entities));
    patients += sep + element(arrayLiteral(c.patients));
    hashes += links[i].hash.toString('hex');
  }
  // One statement text whatever the batch (prepared once per connection): the rows as arrays, the
  // contents as one text cut at a separator JSON never holds raw (RS, U+001E), the links as one
  // hex text (each row's previous link is the one before it, the first's the head).
  const { rowCount } = await db.query(
    `WITH moved AS (UPDATE audit_chain SET head_seq = $1, head_hash = $2 WHERE chain = $3 AND head_seq = $4 AND head_hash = $5 RETURNING chain)
     INSERT INTO audit_event (${COLUMNS}, chain, seq, prev_hash, hash)
     SELECT v.id, v.recorded, v.content, v.type, v.subtypes::text[], v.action, v.outcome, v.agents::text[], v.entities::text[], v.patients::text[],
            $3, $4 + v.n, CASE WHEN v.n = 1 THEN $5 ELSE decode(substr($16, 64 * v.n::int - 127, 64), 'hex') END, decode(substr($16, 64 * v.n::int - 63, 64), 'hex')
       FROM unnest($6::uuid[], $7::timestamptz[], string_to_array($8, chr(30)), $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
            WITH ORDINALITY AS v(id, recorded, content, type, subtypes, action, outcome, agents, entities, patients, n)
      WHERE EXISTS (SELECT 1 FROM moved)`,
    [seq.toString(), hash, chain, head.seq.toString(), head.hash, `{${ids}}`, `{${recorded}}`, contents, `{${types}}`, `{${subtypes}}`, `{${actions}}`, `{${outcomes}}`, `{${agents}}`, `{${entities}}`, `{${patients}}`, hashes],
    { prepare: true },
  );
  return rowCount === rows.length ? { seq, hash } : undefined;
}

/** Characters that make an array element need quotes (or are escaped inside them). */
const NEEDS_QUOTES = /[\s",{}\\]|^$|^null$/i;

/** One element of an array literal: as it is when it can be, else quoted with `"` and `\` escaped. */
function element(value: string): string {
  return NEEDS_QUOTES.test(value) ? `"${value.replace(/[\\"]/g, '\\$&')}"` : value;
}

/** A text[] literal (`{a,"b c"}`), for a column of arrays passed as one array of literals. */
function arrayLiteral(values: string[]): string {
  if (values.length === 0) return '{}';
  let out = '{';
  for (let i = 0; i < values.length; i++) out += (i === 0 ? '' : ',') + element(values[i]);
  return `${out}}`;
}

/** A chain's head as the store holds it now. */
export async function readHead(db: Db, chain: number): Promise<KnownHead> {
  const { rows } = await db.query<{ head_seq: string; head_hash: Uint8Array }>('SELECT head_seq::text AS head_seq, head_hash FROM audit_chain WHERE chain = $1', [chain]);
  if (!rows[0]) throw new Error(`audit chain ${chain} does not exist`);
  return { seq: BigInt(rows[0].head_seq), hash: bytes(rows[0].head_hash) };
}

/** The chains there are. */
export async function chainNumbers(db: Db): Promise<number[]> {
  const { rows } = await db.query<{ chain: number }>('SELECT chain FROM audit_chain ORDER BY chain');
  return rows.map((r) => r.chain);
}

/**
 * Links AuditEvents stored unlinked (writes' events) into a chain, oldest first, at most `limit`;
 * returns how many. Rows another linker holds are skipped (SKIP LOCKED).
 */
export async function linkPending(db: Db, limit = 1000, avoid = 0): Promise<number> {
  // Most calls find nothing pending: answered by the partial index, no transaction, no lock.
  if ((await db.query('SELECT 1 FROM audit_event WHERE chain IS NULL LIMIT 1')).rows.length === 0) return 0;
  return db.transaction(async (tx) => {
    // The rows (and with them the table) before the chain: every linker and the purge lock in that order (no deadlock).
    const { rows } = await tx.query<StoredAudit>(
      `SELECT id, recorded, content FROM audit_event WHERE chain IS NULL ORDER BY recorded, id LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
    );
    if (rows.length === 0) return 0;
    const head = (await takeChain(tx, false, avoid)) ?? (await takeChain(tx, true, avoid))!;
    const { links, seq, hash } = linkAfter(head, rows);
    await tx.query(
      `UPDATE audit_event e SET chain = $1, seq = l.seq, prev_hash = l.prev, hash = l.hash
         FROM (SELECT * FROM unnest($2::uuid[], $3::timestamptz[], $4::bigint[], $5::bytea[], $6::bytea[]) AS t(id, recorded, seq, prev, hash)) l
        WHERE e.id = l.id AND e.recorded = l.recorded`,
      [head.chain, rows.map((r) => r.id), rows.map((r) => r.recorded), links.map((l) => l.seq.toString()), links.map((l) => l.prev), links.map((l) => l.hash)],
    );
    await tx.query('UPDATE audit_chain SET head_seq = $2, head_hash = $3 WHERE chain = $1', [head.chain, seq.toString(), hash]);
    return rows.length;
  });
}

/** Every chain's head, all chains locked until the transaction ends (a checkpoint's view). */
export async function lockedHeads(tx: Db): Promise<{ chain: number; seq: string; hash: string }[]> {
  const { rows } = await tx.query<ChainHead>('SELECT chain, head_seq::text AS head_seq, head_hash FROM audit_chain ORDER BY chain FOR UPDATE');
  return rows.map((r) => ({ chain: r.chain, seq: r.head_seq, hash: bytes(r.head_hash).toString('hex') }));
}

export interface CheckpointRow {
  id: string;
  made_at: Date;
  jws: string;
}

export async function lastCheckpoint(tx: Db): Promise<CheckpointRow | undefined> {
  const { rows } = await tx.query<CheckpointRow>('SELECT id::text AS id, made_at, jws FROM audit_checkpoint ORDER BY id DESC LIMIT 1');
  return rows[0];
}

export async function insertCheckpoint(tx: Db, madeAt: Date, jws: string): Promise<void> {
  await tx.query('INSERT INTO audit_checkpoint (made_at, jws) VALUES ($1, $2)', [madeAt, jws]);
}

export async function checkpoints(db: Db): Promise<CheckpointRow[]> {
  const { rows } = await db.query<CheckpointRow>('SELECT id::text AS id, made_at, jws FROM audit_checkpoint ORDER BY id');
  return rows;
}

