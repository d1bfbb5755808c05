import crypto from 'node:crypto';
import nodemailer from 'nodemailer';
import type { AppContext } from '../../../context';
import { InvalidRequest, RateLimitExceeded, ResourceNotFound, TemporarilyUnavailable } from '../../errors';
import type { KeyEncryption } from '../../keys/key-encryption';
import type { ClientRecord } from '../clients/client-store';
import { deleteExpiredTransactions, openTransaction, replaceAnswer } from './registration-transactions';
import { claimMail, emailTransactionExists, liveMailState, releaseMail } from './registration-transaction-store';
import { hitRateLimit, rateLimitHeaders } from '../../state/rate-limit';
import type { SharedState } from '../../state/shared-state';

/** docs/requirements.md, Mobile clients and e-mail codes: six digits, five minutes, five tries, a mail a minute, three mails. */
export const EMAIL_CODE_TTL_SEC = 300;
export const EMAIL_CODE_MAX_FAILURES = 5;
export const RESEND_COOLDOWN_SEC = 60;
export const MAX_MAILS = 3;
export const EMAIL_CHALLENGE = 'email_otp';
export const MESSAGE_ID = 'otp_verification';

export interface Mail {
  to: string;
  subject: string;
  text: string;
  headers: Record<string, string>;
}

/** Sends one mail or throws; the caller turns a failure into 503 and keeps nothing. */
export interface Mailer {
  send(mail: Mail): Promise<void>;
}

const mailers = new WeakMap<object, Mailer>();

/**
 * SMTP_URL through nodemailer; without it (never in production, config refuses that) the code is
 * written to the log at warn level, marked `dev-only`, so a developer can register a phone app
 * against a laptop.
 */
export function mailerFor(ctx: AppContext): Mailer {
  let mailer = mailers.get(ctx.config);
  if (mailer) return mailer;
  const { smtpUrl, mailFrom } = ctx.config;
  if (smtpUrl) {
    // Bounded waits: a relay that does not answer is a 503 in seconds, not minutes.
    const transport = nodemailer.createTransport({ url: smtpUrl, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000 } as never, { from: mailFrom });
    mailer = {
      async send(m) {
        await transport.sendMail({ from: mailFrom, to: m.to, subject: m.subject, text: m.text, headers: m.headers });
      },
    };
  } else {
    mailer = {
      async send(m) {
        ctx.logger.warn({ dev: 'dev-only', to: maskEmail(m.to), transaction: m.headers['X-Svc-Otp-Transaction'], text: m.text }, 'dev-only: SMTP_URL is unset, the one-time code mail is written here instead');
      },
    };
  }
  mailers.set(ctx.config, mailer);
  return mailer;
}

/** A deliverable-looking address, trimmed, its domain lower-cased (the local part is the mailbox's own). */
export function normalizeEmail(raw: unknown): string {
  if (typeof raw !== 'string') throw new InvalidRequest('invalid_email: user_email must be a string');
  const v = raw.trim();
  const m = /^([^\s@"<>()[\]\\,;:]{1,64})@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63})$/.exec(v);
  if (!m || v.length > 254) throw new InvalidRequest('invalid_email: user_email is not an e-mail address');
  return `${m[1]}@${m[2].toLowerCase()}`;
}

/** `e…@example.org`: enough to recognise, not enough to harvest. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return at > 0 ? `${email[0]}…${email.slice(at)}` : '…';
}

/** The value stored (hashed once more) for a code: keyed, and bound to its transaction. */
export function emailCodeAnswer(kek: KeyEncryption, transactionId: string, code: string): Buffer {
  return kek.mac('email-otp', Buffer.from(`${transactionId}:${code}`, 'utf8'));
}

const newCode = () => String(crypto.randomInt(0, 1_000_000)).padStart(6, '0');

function codeMail(to: string, transactionId: string, code: string): Mail {
  return {
    to,
    subject: `Terminus code ${code}`,
    text: `Your registration code is ${code}.\n\nIt is valid for ${EMAIL_CODE_TTL_SEC / 60} minutes. If you did not register an app, ignore this mail.\n`,
    headers: { 'X-Svc-Otp-Transaction': transactionId, 'X-Svc-Message-Id': MESSAGE_ID },
  };
}

async function sendOrUnavailable(mailer: Mailer, mail: Mail, ctx: AppContext): Promise<void> {
  try {
    await mailer.send(mail);
  } catch (err) {
    // The relay's words may quote the address: log its codes only.
    const e = err as { code?: unknown; responseCode?: unknown };
    ctx.logger.warn({ code: e.code, responseCode: e.responseCode, to: maskEmail(mail.to) }, 'one-time code mail could not be sent');
    // A permanent refusal of the recipient (RFC 5321 5xx on RCPT) is the address's fault, not a retry's.
    if (e.code === 'EENVELOPE' && typeof e.responseCode === 'number' && e.responseCode >= 500) throw new InvalidRequest('invalid_email: the mail relay refuses this address');
    throw new TemporarilyUnavailable('the one-time code could not be mailed; retry later', { headers: { 'Retry-After': '30' } });
  }
}

/** Mails to one address, whatever the client key: a bound on how far anyone can flood an inbox. */
const MAILS_PER_ADDRESS = { limit: 6, windowSec: 3600 };

async function addressMayGetMail(state: SharedState | undefined, mac: Buffer, now: Date): Promise<void> {
  if (!state) return;
  const r = await hitRateLimit(state, `mail:${mac.toString('base64url')}`, MAILS_PER_ADDRESS, now);
  if (!r.allowed) throw new RateLimitExceeded('too many code mails to this address; try again later', { headers: rateLimitHeaders(r) });
}

export interface EmailChallenge {
  transactionId: string;
  expiresIn: number;
}

/**
 * Opens the e-mail challenge of a registration: the code is mailed first and the transaction kept
 * only once the relay took the mail (SMTP down: 503, nothing kept). One open challenge per client
 * key and address (another registration of both: 429), and at most six mails an hour to one
 * address across all keys and replicas.
 */
export async function openEmailChallenge(ctx: AppContext, kek: KeyEncryption, mailer: Mailer, client: ClientRecord, email: string, state?: SharedState): Promise<EmailChallenge> {
  await deleteExpiredTransactions(ctx);
  const mac = kek.mac('email-address', Buffer.from(email, 'utf8'));
  const open = await emailTransactionExists(ctx.db, client.jkt, mac);
  // Its id is not handed out again: a registration proves no possession of the key, so whoever
  // knows a key and an address could otherwise take over the challenge's tries and mails.
  if (open) throw new RateLimitExceeded('a code for this client key and address is pending: enter it, or ask /register/resend with its transaction_id', { headers: { 'Retry-After': String(RESEND_COOLDOWN_SEC) } });
  await addressMayGetMail(state, mac, ctx.now());
  const transactionId = crypto.randomUUID();
  const code = newCode();
  await sendOrUnavailable(mailer, codeMail(email, transactionId, code), ctx);
  try {
    await openTransaction(ctx, EMAIL_CHALLENGE, emailCodeAnswer(kek, transactionId, code), client, EMAIL_CODE_TTL_SEC, {
      transactionId,
      maxFailures: EMAIL_CODE_MAX_FAILURES,
      email: { jkt: client.jkt, mac, sealed: kek.seal(Buffer.from(email, 'utf8')), sentAt: ctx.now() },
    });
  } catch (err) {
    // Two registrations of one key and address at once: the other one holds the challenge.
    if ((err as { code?: string }).code === '23505') throw new RateLimitExceeded('a code for this client key and address was just sent; use it or resend later', { headers: { 'Retry-After': String(RESEND_COOLDOWN_SEC) } });
    throw err;
  }
  return { transactionId, expiresIn: EMAIL_CODE_TTL_SEC };
}

/**
 * POST /register/resend: a new code (the old one stops working) and a new lifetime, at most one
 * mail a minute and three per transaction (429 with Retry-After). The mail slot is claimed in one
 * statement, so two replicas cannot both send; a mail that fails gives the slot back.
 */
export async function resendEmailCode(ctx: AppContext, kek: KeyEncryption, mailer: Mailer, transactionId: string, state?: SharedState): Promise<EmailChallenge> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(transactionId)) throw new ResourceNotFound('no pending registration with this transaction_id (unknown, expired or used)');
  const now = ctx.now();
  const row = await liveMailState(ctx.db, transactionId, EMAIL_CHALLENGE, now);
  if (!row?.emailSealed) throw new ResourceNotFound('no pending e-mail registration with this transaction_id (unknown, expired or used)');
  const last = row.lastMailAt;
  if (row.mails >= MAX_MAILS) {
    const wait = Math.max(1, Math.ceil((row.expiresAt.getTime() - now.getTime()) / 1000));
    throw new RateLimitExceeded(`at most ${MAX_MAILS} mails per registration`, { headers: { 'Retry-After': String(wait) } });
  }
  const cooldownEnds = last.getTime() + RESEND_COOLDOWN_SEC * 1000;
  if (cooldownEnds > now.getTime()) {
    throw new RateLimitExceeded(`one mail a minute: wait before asking for another code`, { headers: { 'Retry-After': String(Math.ceil((cooldownEnds - now.getTime()) / 1000)) } });
  }
  if (!(await claimMail(ctx.db, transactionId, now, row.mails, last, MAX_MAILS))) throw new RateLimitExceeded('another code was just sent for this registration', { headers: { 'Retry-After': String(RESEND_COOLDOWN_SEC) } });
  const code = newCode();
  const email = kek.open(row.emailSealed).toString('utf8');
  try {
    await addressMayGetMail(state, kek.mac('email-address', Buffer.from(email, 'utf8')), now);
  } catch (err) {
    await releaseMail(ctx.db, transactionId, last);
    throw err;
  }
  try {
    await sendOrUnavailable(mailer, codeMail(email, transactionId, code), ctx);
  } catch (err) {
    await releaseMail(ctx.db, transactionId, last);
    throw err;
  }
  await replaceAnswer(ctx, transactionId, emailCodeAnswer(kek, transactionId, code), new Date(now.getTime() + EMAIL_CODE_TTL_SEC * 1000));
  return { transactionId, expiresIn: EMAIL_CODE_TTL_SEC };
}
