import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { ClientRecord } from '../clients/client-store';

/** Wrong answers a transaction survives; the last one ends it (CONTRACT 8: the third wrong answer). */
export const MAX_FAILURES = 3;

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
export async function openTransaction(ctx: AppContext, challengeType: string, answer: Buffer, client: ClientRecord, ttlSec: number): Promise<string> {
  const transactionId = crypto.randomUUID();
  const now = ctx.now();
  await ctx.db.query('DELETE FROM guard_registration_transaction WHERE expires_at <= $1', [now]);
  await ctx.db.query(
    `INSERT INTO guard_registration_transaction (transaction_id, challenge_type, answer_hash, client, expires_at) VALUES ($1, $2, $3, $4, $5)`,
    [transactionId, challengeType, answerHash(answer), JSON.stringify(client), new Date(now.getTime() + ttlSec * 1000)],
  );
  return transactionId;
}

/** The live transaction, or undefined when it is unknown, expired or used. */
export async function findTransaction(ctx: AppContext, transactionId: string): Promise<{ challengeType: string } | undefined> {
  if (!UUID.test(transactionId)) return undefined;
  const r = await ctx.db.query<{ challenge_type: string }>(
    'SELECT challenge_type FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < $3',
    [transactionId, ctx.now(), MAX_FAILURES],
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
    'SELECT answer_hash FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < $3',
    [transactionId, now, MAX_FAILURES],
  );
  const row = r.rows[0];
  if (!row) return { kind: 'gone' };
  const expected = Buffer.from(row.answer_hash);
  if (!crypto.timingSafeEqual(expected, answerHash(answer))) {
    const u = await ctx.db.query<{ failures: number }>(
      'UPDATE guard_registration_transaction SET failures = failures + 1 WHERE transaction_id = $1 AND failures < $2 RETURNING failures',
      [transactionId, MAX_FAILURES],
    );
    const failures = u.rows[0]?.failures ?? MAX_FAILURES;
    if (failures >= MAX_FAILURES) await ctx.db.query('DELETE FROM guard_registration_transaction WHERE transaction_id = $1', [transactionId]);
    return { kind: 'wrong', triesLeft: Math.max(0, MAX_FAILURES - failures) };
  }
  const d = await ctx.db.query<{ challenge_type: string; client: ClientRecord }>(
    'DELETE FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < $3 RETURNING challenge_type, client',
    [transactionId, now, MAX_FAILURES],
  );
  const used = d.rows[0];
  if (!used) return { kind: 'gone' };
  const client = typeof used.client === 'string' ? (JSON.parse(used.client) as ClientRecord) : used.client;
  return { kind: 'right', transaction: { transactionId, challengeType: used.challenge_type, client: { ...client, issuedAt: new Date(client.issuedAt) } } };
}
