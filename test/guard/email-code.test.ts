import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { simpleParser } from 'mailparser';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import request from 'supertest';
import { generateEcKey } from '../../src/client/crypto';
import { mailerFor } from '../../src/guard/authserver/registration/email-code';
import { guardHarness, TOKEN_EXCHANGE, type Harness } from './helpers/harness';

interface Received {
  to: string;
  subject: string;
  text: string;
  transaction: string;
  messageId: string;
  code: string;
}

/** A real SMTP receiver on loopback: what the guard mails, parsed as a mail client would. */
class Inbox {
  readonly mails: Received[] = [];
  private server?: SMTPServer;
  port = 0;
  /** A recipient the relay refuses with 550. */
  rejectTo?: string;

  async start(port = 0): Promise<this> {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onRcptTo: (address, _session, done) => {
        if (address.address === this.rejectTo) return done(Object.assign(new Error('no such user'), { responseCode: 550 }));
        done();
      },
      onData: (stream, _session, done) => {
        simpleParser(stream)
          .then((m) => {
            const text = m.text ?? '';
            this.mails.push({
              to: (Array.isArray(m.to) ? m.to[0] : m.to)?.text ?? '',
              subject: m.subject ?? '',
              text,
              transaction: String(m.headers.get('x-svc-otp-transaction') ?? ''),
              messageId: String(m.headers.get('x-svc-message-id') ?? ''),
              code: /\b(\d{6})\b/.exec(text)?.[1] ?? '',
            });
            done();
          })
          .catch(done);
      },
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', () => resolve()));
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  codeFor(transaction: string): string {
    const mail = [...this.mails].reverse().find((m) => m.transaction === transaction);
    if (!mail) throw new Error(`no mail for ${transaction}`);
    return mail.code;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server!.close(() => resolve()));
  }
}

/**
 * A mobile registration with `user_email` is bound to the address by a mailed
 * six-digit code (real SMTP through nodemailer into smtp-server): 202, then `/register/verify`,
 * `/register/resend` under a cooldown and a mail limit; codes stored keyed, single use, five tries.
 */
describe('e-mail one-time codes', () => {
  const inbox = new Inbox();
  let h: Harness;

  beforeAll(async () => {
    await inbox.start();
    h = await guardHarness({ env: { SMTP_URL: `smtp://127.0.0.1:${inbox.port}`, MAIL_FROM: 'Praxis <termine@praxis.example>' } });
  });
  afterAll(async () => {
    await h?.close();
    await inbox.stop();
  });

  let n = 0;
  const register = async (email: unknown = `Erika.Mustermann+${n++}@Example.ORG`, extra: Record<string, unknown> = {}) => {
    const key = await generateEcKey();
    const res = await request(h.app)
      .post('/svc/v1/register')
      .send({ client_name: 'Patienten-App', token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE, 'refresh_token'], jwks: { keys: [{ ...key.publicJwk, use: 'sig' }] }, user_email: email, ...extra });
    return { res, key };
  };
  const verify = (transaction: string, code: string) => request(h.app).post('/svc/v1/register/verify').send({ transaction_id: transaction, verify_type: 'email_otp', code });
  const resend = (transaction: string) => request(h.app).post('/svc/v1/register/resend').send({ transaction_id: transaction });
  const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');
  const pending = async () => (await h.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM guard_registration_transaction')).rows[0].n;

  test('the right code registers the client; the mail names the transaction and holds the code once', async () => {
    const { res } = await register();
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ transaction_id: expect.any(String), status: 'pending_verification', expires_in: 300, challenge_type: 'email_otp', message_id: 'otp_verification' });
    const mail = inbox.mails.find((m) => m.transaction === res.body.transaction_id)!;
    expect(mail).toMatchObject({ to: 'Erika.Mustermann+0@example.org', messageId: 'otp_verification', code: expect.stringMatching(/^\d{6}$/) });
    expect(mail.text.split(mail.code).length - 1).toBe(1);
    const ok = await verify(res.body.transaction_id, mail.code);
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ client_id: expect.any(String), status: 'pending_attestation' });
    // Single use: the same code again finds nothing.
    expect((await verify(res.body.transaction_id, mail.code)).status).toBe(404);
  });

  test('four wrong codes, then the right one: 201; five wrong: the transaction is gone', async () => {
    const a = (await register()).res.body.transaction_id;
    const codeA = inbox.codeFor(a);
    for (let i = 0; i < 4; i++) {
      const r = await verify(a, wrong(codeA));
      expect([r.status, r.body.error]).toEqual([400, 'invalid_request']);
      expect(r.body.error_description).toMatch(/^invalid_otp: /);
    }
    expect((await verify(a, codeA)).status).toBe(201);

    const b = (await register()).res.body.transaction_id;
    const codeB = inbox.codeFor(b);
    for (let i = 0; i < 5; i++) expect((await verify(b, wrong(codeB))).status).toBe(400);
    expect((await verify(b, codeB)).status).toBe(404);
  });

  test('an expired code: 404', async () => {
    const t = (await register()).res.body.transaction_id;
    h.ctx.clock.advance(301_000);
    expect((await verify(t, inbox.codeFor(t))).status).toBe(404);
  });

  test('resend: not within a minute (429, Retry-After), then a new code replaces the old; at most three mails', async () => {
    const t = (await register()).res.body.transaction_id;
    const first = inbox.codeFor(t);
    const early = await resend(t);
    expect([early.status, early.body.error]).toEqual([429, 'rate_limit_exceeded']);
    expect(Number(early.headers['retry-after'])).toBeGreaterThan(0);
    h.ctx.clock.advance(61_000);
    const again = await resend(t);
    expect([again.status, again.body]).toEqual([202, { transaction_id: t, status: 'pending_verification', expires_in: 300 }]);
    const second = inbox.codeFor(t);
    if (second !== first) expect((await verify(t, first)).status).toBe(400);
    h.ctx.clock.advance(61_000);
    expect((await resend(t)).status).toBe(202);
    h.ctx.clock.advance(61_000);
    const fourth = await resend(t);
    expect([fourth.status, fourth.body.error]).toEqual([429, 'rate_limit_exceeded']);
    expect(inbox.mails.filter((m) => m.transaction === t)).toHaveLength(3);
    expect((await verify(t, inbox.codeFor(t))).status).toBe(201);
  });

  test('the same key and address again: 429 without the pending transaction id (it proves no possession of the key)', async () => {
    const key = await generateEcKey();
    const body = { client_name: 'App', token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE], jwks: { keys: [{ ...key.publicJwk, use: 'sig' }] }, user_email: 'max@example.org' };
    const one = await request(h.app).post('/svc/v1/register').send(body);
    expect(one.status).toBe(202);
    const two = await request(h.app).post('/svc/v1/register').send(body);
    expect([two.status, two.body.error, two.body.transaction_id]).toEqual([429, 'rate_limit_exceeded', undefined]);
    expect(JSON.stringify(two.body)).not.toContain(one.body.transaction_id);
  });

  test('at most six mails an hour to one address, whatever the client key', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await register('flooded@example.org')).res.status);
    expect(statuses).toEqual([202, 202, 202, 202, 202, 202, 429]);
    expect(inbox.mails.filter((m) => m.to === 'flooded@example.org')).toHaveLength(6);
  });

  test('a relay that refuses the recipient for good: 400 invalid_email, nothing kept', async () => {
    const before = await pending();
    inbox.rejectTo = 'nobody@example.org';
    try {
      const res = (await register('nobody@example.org')).res;
      expect([res.status, res.body.error]).toEqual([400, 'invalid_request']);
      expect(res.body.error_description).toMatch(/^invalid_email: /);
    } finally {
      inbox.rejectTo = undefined;
    }
    expect(await pending()).toBe(before);
  });

  test('20 parallel verifications with the right code: exactly one 201', async () => {
    const t = (await register()).res.body.transaction_id;
    const code = inbox.codeFor(t);
    const statuses = (await Promise.all(Array.from({ length: 20 }, () => verify(t, code)))).map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s !== 201).every((s) => s === 404)).toBe(true);
  });

  test('bad input: no address, a malformed one, a malformed code, an e-mail for a TPM registration', async () => {
    const bad = await register('not-an-address');
    expect([bad.res.status, bad.res.body.error]).toEqual([400, 'invalid_request']);
    expect(bad.res.body.error_description).toMatch(/^invalid_email: /);
    expect((await register(42)).res.status).toBe(400);
    const t = (await register()).res.body.transaction_id;
    const malformed = await verify(t, '12ab');
    expect([malformed.status, malformed.body.error]).toEqual([400, 'invalid_request']);
    const tpm = await register('a@example.org', { attestation_type: 'tpm' });
    expect(tpm.res.status).toBe(400);
  });

  test('SMTP down: 503 with Retry-After and nothing kept', async () => {
    const down = await guardHarness({ env: { SMTP_URL: 'smtp://127.0.0.1:1' }, db: h.ctx.db });
    try {
      const before = await pending();
      const key = await generateEcKey();
      const res = await request(down.app)
        .post('/svc/v1/register')
        .send({ client_name: 'App', token_endpoint_auth_method: 'private_key_jwt', grant_types: [TOKEN_EXCHANGE], jwks: { keys: [{ ...key.publicJwk, use: 'sig' }] }, user_email: 'x@example.org' });
      expect([res.status, res.body.error]).toEqual([503, 'temporarily_unavailable']);
      expect(res.headers['retry-after']).toBeDefined();
      expect(await pending()).toBe(before);
    } finally {
      await down.close();
    }
  });

  test('without SMTP_URL (development): the code goes to the log at warn level, marked dev-only, the address masked', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (c, _e, done) => (lines.push(JSON.parse(String(c))), done()) }));
    const mailer = mailerFor({ ...h.ctx, config: { ...h.ctx.config, smtpUrl: undefined }, logger });
    await mailer.send({ to: 'erika@example.org', subject: 's', text: 'Your registration code is 123456.', headers: { 'X-Svc-Otp-Transaction': 't' } });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, dev: 'dev-only', to: 'e…@example.org' });
    expect(JSON.stringify(lines[0])).toContain('123456');
    expect(JSON.stringify(lines[0])).not.toContain('erika@');
  });
});
