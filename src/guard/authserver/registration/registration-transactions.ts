import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { ClientRecord } from '../clients/client-store';

/** Wrong answers a TPM activation survives; the last one ends it (docs/requirements.md, Hardware attestation: the third wrong answer). */
export const MAX_FAILURES = 3;

/** What else a transaction may hold: its id (already mailed), its own failure limit, an e-mail challenge. */
export interface TransactionOptions {
  transactionId?: string;
  maxFailures?: number;
  email?: { jkt: string; mac: Buffer; sealed: string; sentAt: Date };
}

/** A registration waiting for its challenge answer (TPM credential activation, e-mail code). */
export interface RegistrationTransaction {
  transactionId: string;
  challengeType: string;
  client: ClientRecord;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const answerHash = (answer: Buffer) => crypto.createHash('sha256').update(answer).digest();

/**
 * Pending registrations in the database every replica shares. Single use and the failure count are
 * single statements (DELETE ... RETURNING, UPDATE ... RETURNING), so two replicas racing on one
 * transaction cannot both win.
 */
export async function openTransaction(ctx: AppContext, challengeType: string, answer: Buffer, client: ClientRecord, ttlSec: number, o: TransactionOptions = {}): Promise<string> {
  const transactionId = o.transactionId ?? crypto.randomUUID();
  const now = ctx.now();
  await deleteExpiredTransactions(ctx);
  await ctx.db.query(
    `INSERT INTO guard_registration_transaction (transaction_id, challenge_type, answer_hash, client, expires_at, max_failures, client_jkt, email_mac, email_sealed, mails, last_mail_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      transactionId,
      challengeType,
      answerHash(answer),
      JSON.stringify(client),
      new Date(now.getTime() + ttlSec * 1000),
      o.maxFailures ?? MAX_FAILURES,
      o.email?.jkt ?? null,
      o.email?.mac ?? null,
      o.email?.sealed ?? null,
      o.email ? 1 : 0,
      o.email?.sentAt ?? null,
    ],
  );
  return transactionId;
}

/** A new expected answer and lifetime (a resent e-mail code; the old code stops working). */
export async function replaceAnswer(ctx: AppContext, transactionId: string, answer: Buffer, expiresAt: Date): Promise<void> {
  await ctx.db.query('UPDATE guard_registration_transaction SET answer_hash = $2, expires_at = $3 WHERE transaction_id = $1', [transactionId, answerHash(answer), expiresAt]);
}

export async function deleteExpiredTransactions(ctx: AppContext): Promise<void> {
  await ctx.db.query('DELETE FROM guard_registration_transaction WHERE expires_at <= $1 OR failures >= max_failures', [ctx.now()]);
}

/** The live transaction, or undefined when it is unknown, expired or used. */
export async function findTransaction(ctx: AppContext, transactionId: string): Promise<{ challengeType: string } | undefined> {
  if (!UUID.test(transactionId)) return undefined;
  const r = await ctx.db.query<{ challenge_type: string }>(
    'SELECT challenge_type FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures',
    [transactionId, ctx.now()],
  );
  return r.rows[0] ? { challengeType: r.rows[0].challenge_type } : undefined;
}

export type AnswerOutcome = { kind: 'right'; transaction: RegistrationTransaction } | { kind: 'wrong'; triesLeft: number } | { kind: 'gone' };

/**
 * Checks an answer in constant time. Right: the transaction is consumed and returned (once, across
 * replicas). Wrong: one failure more; the last allowed failure deletes it.
 */
export async function answerTransaction(ctx: AppContext, transactionId: string, answer: Buffer): Promise<AnswerOutcome> {
  if (!UUID.test(transactionId)) return { kind: 'gone' };
  const now = ctx.now();
  const r = await ctx.db.query<{ answer_hash: Buffer | Uint8Array }>(
    'SELECT answer_hash FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures',
    [transactionId, now],
  );
  const row = r.rows[0];
  if (!row) return { kind: 'gone' };
  const expected = Buffer.from(row.answer_hash);
  if (!crypto.timingSafeEqual(expected, answerHash(answer))) {
    const u = await ctx.db.query<{ failures: number; max_failures: number }>(
      'UPDATE guard_registration_transaction SET failures = failures + 1 WHERE transaction_id = $1 AND failures < max_failures RETURNING failures, max_failures',
      [transactionId],
    );
    const left = u.rows[0] ? u.rows[0].max_failures - u.rows[0].failures : 0;
    if (left <= 0) await ctx.db.query('DELETE FROM guard_registration_transaction WHERE transaction_id = $1', [transactionId]);
    return { kind: 'wrong', triesLeft: Math.max(0, left) };
  }
  const d = await ctx.db.query<{ challenge_type: string; client: ClientRecord }>(
    'DELETE FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures RETURNING challenge_type, client',
    [transactionId, now],
  );
  const used = d.rows[0];
  if (!used) return { kind: 'gone' };
  const client = typeof used.client === 'string' ? (JSON.parse(used.client) as ClientRecord) : used.client;
  return { kind: 'right', transaction: { transactionId, challengeType: used.challenge_type, client: { ...client, issuedAt: new Date(client.issuedAt) } } };
}
