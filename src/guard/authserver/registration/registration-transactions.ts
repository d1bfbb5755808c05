import crypto from 'node:crypto';
import type { AppContext } from '../../../context';
import type { ClientRecord } from '../clients/client-store';
import { countFailure, deleteTransaction, insertTransaction, liveAnswerHash, liveChallengeType, purgeTransactions, takeTransaction, updateAnswerHash } from './registration-transaction-store';

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
  await insertTransaction(ctx.db, {
    transactionId,
    challengeType,
    answerHash: answerHash(answer),
    client,
    expiresAt: new Date(now.getTime() + ttlSec * 1000),
    maxFailures: o.maxFailures ?? MAX_FAILURES,
    email: o.email,
  });
  return transactionId;
}

/** A new expected answer and lifetime (a resent e-mail code; the old code stops working). */
export async function replaceAnswer(ctx: AppContext, transactionId: string, answer: Buffer, expiresAt: Date): Promise<void> {
  await updateAnswerHash(ctx.db, transactionId, answerHash(answer), expiresAt);
}

export async function deleteExpiredTransactions(ctx: AppContext): Promise<void> {
  await purgeTransactions(ctx.db, ctx.now());
}

/** The live transaction, or undefined when it is unknown, expired or used. */
export async function findTransaction(ctx: AppContext, transactionId: string): Promise<{ challengeType: string } | undefined> {
  if (!UUID.test(transactionId)) return undefined;
  const challengeType = await liveChallengeType(ctx.db, transactionId, ctx.now());
  return challengeType ? { challengeType } : undefined;
}

export type AnswerOutcome = { kind: 'right'; transaction: RegistrationTransaction } | { kind: 'wrong'; triesLeft: number } | { kind: 'gone' };

/**
 * Checks an answer in constant time. Right: the transaction is consumed and returned (once, across
 * replicas). Wrong: one failure more; the last allowed failure deletes it.
 */
export async function answerTransaction(ctx: AppContext, transactionId: string, answer: Buffer): Promise<AnswerOutcome> {
  if (!UUID.test(transactionId)) return { kind: 'gone' };
  const now = ctx.now();
  const expected = await liveAnswerHash(ctx.db, transactionId, now);
  if (!expected) return { kind: 'gone' };
  if (!crypto.timingSafeEqual(expected, answerHash(answer))) {
    const left = await countFailure(ctx.db, transactionId);
    if (left <= 0) await deleteTransaction(ctx.db, transactionId);
    return { kind: 'wrong', triesLeft: Math.max(0, left) };
  }
  const used = await takeTransaction(ctx.db, transactionId, now);
  if (!used) return { kind: 'gone' };
  const client = typeof used.client === 'string' ? (JSON.parse(used.client) as ClientRecord) : used.client;
  return { kind: 'right', transaction: { transactionId, challengeType: used.challengeType, client: { ...client, issuedAt: new Date(client.issuedAt) } } };
}
