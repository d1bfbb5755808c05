/**
 * The floor of a scenario (issue 15): the least a server must do to answer it, run as its own
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
 *   "transaction": true                  (the statements in BEGIN … COMMIT on one connection)
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

interface Spec {
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

async function serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  for await (const _ of req); // the body, read as Terminus reads it
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
  if (pool && answer.sql?.length) {
    if (spec.transaction) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        for (const s of answer.sql) await client.query({ name: nameOf(s.text), text: s.text, values: s.values });
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    } else {
      for (const s of answer.sql) await pool.query({ name: nameOf(s.text), text: s.text, values: s.values });
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
