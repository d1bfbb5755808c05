import type { Db } from '../../../store';
import type { ClientRecord } from '../clients/client-store';

/** A new row of guard_registration_transaction (the answer as its hash; an e-mail challenge with its sealed address and first mail). */
export interface NewTransactionRow {
  transactionId: string;
  challengeType: string;
  answerHash: Buffer;
  client: ClientRecord;
  expiresAt: Date;
  maxFailures: number;
  email?: { jkt: string; mac: Buffer; sealed: string; sentAt: Date };
}

/** What a resend reads of a live e-mail transaction. */
export interface MailRow {
  mails: number;
  lastMailAt: Date;
  emailSealed: string | null;
  expiresAt: Date;
}

export async function insertTransaction(db: Db, t: NewTransactionRow): Promise<void> {
  await db.query(
    `INSERT INTO guard_registration_transaction (transaction_id, challenge_type, answer_hash, client, expires_at, max_failures, client_jkt, email_mac, email_sealed, mails, last_mail_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [t.transactionId, t.challengeType, t.answerHash, JSON.stringify(t.client), t.expiresAt, t.maxFailures, t.email?.jkt ?? null, t.email?.mac ?? null, t.email?.sealed ?? null, t.email ? 1 : 0, t.email?.sentAt ?? null],
  );
}

export async function updateAnswerHash(db: Db, transactionId: string, answerHash: Buffer, expiresAt: Date): Promise<void> {
  await db.query('UPDATE guard_registration_transaction SET answer_hash = $2, expires_at = $3 WHERE transaction_id = $1', [transactionId, answerHash, expiresAt]);
}

/** Removes the expired transactions and those out of tries. */
export async function purgeTransactions(db: Db, now: Date): Promise<void> {
  await db.query('DELETE FROM guard_registration_transaction WHERE expires_at <= $1 OR failures >= max_failures', [now]);
}

/** The challenge type of a live transaction (unexpired, tries left). */
export async function liveChallengeType(db: Db, transactionId: string, now: Date): Promise<string | undefined> {
  const r = await db.query<{ challenge_type: string }>('SELECT challenge_type FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures', [transactionId, now]);
  return r.rows[0]?.challenge_type;
}

/** The expected answer's hash of a live transaction. */
export async function liveAnswerHash(db: Db, transactionId: string, now: Date): Promise<Buffer | undefined> {
  const r = await db.query<{ answer_hash: Buffer | Uint8Array }>('SELECT answer_hash FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures', [transactionId, now]);
  return r.rows[0] ? Buffer.from(r.rows[0].answer_hash) : undefined;
}

/** Counts a wrong answer in one statement; the tries left (0 when none or no transaction). */
export async function countFailure(db: Db, transactionId: string): Promise<number> {
  const u = await db.query<{ failures: number; max_failures: number }>(
    'UPDATE guard_registration_transaction SET failures = failures + 1 WHERE transaction_id = $1 AND failures < max_failures RETURNING failures, max_failures',
    [transactionId],
  );
  return u.rows[0] ? u.rows[0].max_failures - u.rows[0].failures : 0;
}

export async function deleteTransaction(db: Db, transactionId: string): Promise<void> {
  await db.query('DELETE FROM guard_registration_transaction WHERE transaction_id = $1', [transactionId]);
}

/** Takes a live transaction (single use: DELETE … RETURNING); its challenge type and client as stored, or undefined. */
export async function takeTransaction(db: Db, transactionId: string, now: Date): Promise<{ challengeType: string; client: ClientRecord | string } | undefined> {
  const d = await db.query<{ challenge_type: string; client: ClientRecord | string }>(
    'DELETE FROM guard_registration_transaction WHERE transaction_id = $1 AND expires_at > $2 AND failures < max_failures RETURNING challenge_type, client',
    [transactionId, now],
  );
  return d.rows[0] ? { challengeType: d.rows[0].challenge_type, client: d.rows[0].client } : undefined;
}

/** Whether a transaction of this client key and e-mail address exists. */
export async function emailTransactionExists(db: Db, clientJkt: string, emailMac: Buffer): Promise<boolean> {
  const open = await db.query<{ transaction_id: string }>('SELECT transaction_id FROM guard_registration_transaction WHERE client_jkt = $1 AND email_mac = $2', [clientJkt, emailMac]);
  return open.rows.length > 0;
}

/** The mail state of a live transaction of this challenge type. */
export async function liveMailState(db: Db, transactionId: string, challengeType: string, now: Date): Promise<MailRow | undefined> {
  const r = await db.query<{ mails: number; last_mail_at: Date | string; email_sealed: string | null; expires_at: Date | string }>(
    `SELECT mails, last_mail_at, email_sealed, expires_at FROM guard_registration_transaction
      WHERE transaction_id = $1 AND challenge_type = $2 AND expires_at > $3 AND failures < max_failures`,
    [transactionId, challengeType, now],
  );
  const row = r.rows[0];
  return row ? { mails: row.mails, lastMailAt: new Date(row.last_mail_at), emailSealed: row.email_sealed, expiresAt: new Date(row.expires_at) } : undefined;
}

/**
 * Claims the next mail in one statement, only if nobody claimed one since `mails` and `lastMailAt`
 * were read and fewer than `maxMails` were sent: whether this caller got it.
 */
export async function claimMail(db: Db, transactionId: string, now: Date, mails: number, lastMailAt: Date, maxMails: number): Promise<boolean> {
  const claimed = await db.query(
    `UPDATE guard_registration_transaction SET mails = mails + 1, last_mail_at = $2
      WHERE transaction_id = $1 AND mails = $3 AND last_mail_at = $4 AND mails < $5 RETURNING transaction_id`,
    [transactionId, now, mails, lastMailAt, maxMails],
  );
  return claimed.rows.length > 0;
}

/** Gives a claimed mail back (it was not sent): the count and the time of the last mail as before. */
export async function releaseMail(db: Db, transactionId: string, lastMailAt: Date): Promise<void> {
  await db.query('UPDATE guard_registration_transaction SET mails = mails - 1, last_mail_at = $2 WHERE transaction_id = $1', [transactionId, lastMailAt]);
}
