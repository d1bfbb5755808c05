/**
 * The floor of a scenario: the least a server must do to answer it, run as its own
 * process beside Terminus so both see the same machine. Per request, by the request's path and
 * query, it runs the statements Terminus would (replayed with `pg`, prepared), the ES256 checks
 * and signatures of the protocol on cached key objects, one Redis round trip of the same kind,
 * and answers the bytes Terminus answered; nothing else (no framework, no validation, no log).
 *
 * Configured by FLOOR_SPEC, a JSON file: {
 *   "answers": { "<path?query>": { "body": "...", "contentType": "...", "sql"?: [{ "text", "values" }] } },
 *   "defaultAnswer"?: "<path?query>",    (paths not listed answer as this one)
 *   "verifies": n, "signs": n,           (ES256 per request)
 *   "redis": true,                       (one script call per request: SET NX + INCR, as the guard)
 *   "transaction": true,                 (the statements in BEGIN … COMMIT on one connection)
 *   "booking"?: { ... }                  (the statements of a captured $book, per slot: BookingTemplate)
 * }
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import { Pool } from 'pg';

interface Statement {
  text: string;
  values: unknown[];
}

interface Answer {
  body: string;
  contentType: string;
  status?: number;
  sql?: Statement[];
}

/**
 * The booking floor: the statements of one captured `$book` of the bench's template slot, replayed
 * for the slot the request names: its id, times and schedule, and a new Appointment id, put in place
 * of the template's (bench/book.ts lays slots out: slot i of schedule i % schedules, `minutes` long,
 * the k-th of its schedule starting at firstMs + k * minutes).
 */
export interface BookingTemplate {
  sql: Statement[];
  slotId: string;
  scheduleId: string;
  appointmentId: string;
  start: string;
  end: string;
  slotPrefix: string;
  schedulePrefix: string;
  schedules: number;
  firstMs: number;
  minutes: number;
}

interface Spec {
  booking?: BookingTemplate;
  answers: Record<string, Answer>;
  defaultAnswer?: string;
  verifies?: number;
  signs?: number;
  redis?: boolean;
  transaction?: boolean;
}

const spec = JSON.parse(fs.readFileSync(process.env.FLOOR_SPEC as string, 'utf8')) as Spec;
const pool = process.env.DATABASE_URL ? new Pool({ connectionString: process.env.DATABASE_URL, max: 20 }) : undefined;
const redis = spec.redis && process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
redis?.defineCommand('floorLedger', {
  numberOfKeys: 2,
  lua: "local f = redis.call('SET', KEYS[1], '1', 'PX', 120000, 'NX') local n = redis.call('INCR', KEYS[2]) redis.call('PEXPIRE', KEYS[2], 60000) return {f and 1 or 0, n}",
});

const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signingInput = Buffer.from(`${Buffer.from('{"alg":"ES256","typ":"dpop+jwt"}').toString('base64url')}.${crypto.randomBytes(180).toString('base64url')}`);
const signature = crypto.sign('sha256', signingInput, { key: privateKey, dsaEncoding: 'ieee-p1363' });
const statementNames = new Map<string, string>();
const nameOf = (text: string) => {
  let n = statementNames.get(text);
  if (!n) statementNames.set(text, (n = `f_${crypto.createHash('sha1').update(text).digest('hex').slice(0, 20)}`));
  return n;
};

/** The template's statements for the slot a `$book` body names. */
function bookingStatements(t: BookingTemplate, body: string): Statement[] {
  const appointment = JSON.parse(body) as { slot: { reference: string }[] };
  const slotId = appointment.slot[0].reference.slice('Slot/'.length);
  const i = Number(slotId.slice(t.slotPrefix.length));
  const startMs = t.firstMs + Math.floor(i / t.schedules) * t.minutes * 60_000;
  const iso = (ms: number) => new Date(ms).toISOString();
  const swaps: [string, string][] = [
    [t.slotId, slotId],
    [t.scheduleId, `${t.schedulePrefix}${i % t.schedules}`],
    [t.appointmentId, crypto.randomUUID()],
    [t.start, iso(startMs)],
    [t.start.replace('.000Z', 'Z'), iso(startMs).replace('.000Z', 'Z')],
    [t.end, iso(startMs + t.minutes * 60_000)],
    [t.end.replace('.000Z', 'Z'), iso(startMs + t.minutes * 60_000).replace('.000Z', 'Z')],
  ];
  let text = JSON.stringify(t.sql);
  for (const [from, to] of swaps) text = text.split(from).join(to);
  return JSON.parse(text) as Statement[];
}

async function serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer); // the body, read as Terminus reads it
  const answer = spec.answers[req.url ?? ''] ?? (spec.defaultAnswer ? spec.answers[spec.defaultAnswer] : undefined);
  if (!answer) {
    res.writeHead(404).end();
    return;
  }
  for (let i = 0; i < (spec.verifies ?? 0); i++) {
    if (!crypto.verify('sha256', signingInput, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature)) throw new Error('verify');
  }
  for (let i = 0; i < (spec.signs ?? 0); i++) crypto.sign('sha256', signingInput, { key: privateKey, dsaEncoding: 'ieee-p1363' });
  if (redis) await (redis as unknown as { floorLedger(a: string, b: string): Promise<unknown> }).floorLedger(`floor:jti:${crypto.randomUUID()}`, 'floor:rl');
  const statements = spec.booking ? bookingStatements(spec.booking, Buffer.concat(chunks).toString('utf8')) : answer.sql;
  if (pool && statements?.length) {
    if (spec.transaction) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        for (const s of statements) await client.query({ name: nameOf(s.text), text: s.text, values: s.values });
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    } else {
      for (const s of statements) await pool.query({ name: nameOf(s.text), text: s.text, values: s.values });
    }
  }
  res.writeHead(answer.status ?? 200, { 'content-type': answer.contentType, 'content-length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

const server = http.createServer((req, res) => {
  serve(req, res).catch((err: unknown) => {
    process.stderr.write(`floor: ${String(err)}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => {
  server.close();
  void pool?.end();
  redis?.disconnect();
  setTimeout(() => process.exit(0), 200).unref();
});
