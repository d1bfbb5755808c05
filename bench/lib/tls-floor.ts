import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

/**
 * The floor of the TLS benchmark: a bare node:http and a bare node:https server (TLS 1.3, the
 * benchmark's certificate) answering what Terminus's /healthz answers, on PORT and TLS_PORT; prints
 * a line once both listen. What TLS costs Node itself per request, beside what it costs Terminus.
 */
const body = JSON.stringify({ status: 'ok' });
const answer = (_req: http.IncomingMessage, res: http.ServerResponse) => {
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(body);
};
const plain = http.createServer(answer);
const secure = https.createServer({ cert: fs.readFileSync(process.env.TLS_CERT_FILE!), key: fs.readFileSync(process.env.TLS_KEY_FILE!), minVersion: 'TLSv1.3' }, answer);
let listening = 0;
const ready = () => {
  if (++listening === 2) process.stdout.write('ready\n');
};
plain.listen(Number(process.env.PORT), '127.0.0.1', ready);
secure.listen(Number(process.env.TLS_PORT), '127.0.0.1', ready);
process.on('SIGTERM', () => process.exit(0));
