import type { Express } from 'express';
import request from 'supertest';
import { parseJson, type HttpTransport } from '../../../src/client/transport';

/** Sends the client library's requests into an Express app (path and query of the published URL). */
export function supertestTransport(app: Express): HttpTransport {
  const agent = request(app);
  return async (req) => {
    const u = new URL(req.url);
    const method = req.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    let r = agent[method](`${u.pathname}${u.search}`);
    for (const [k, v] of Object.entries(req.headers)) r = r.set(k, v);
    // Every answer as bytes (ASL's CBOR and frames too), its text decoded from them.
    r = r.buffer(true).parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
    const res = req.body !== undefined ? await r.send(req.body) : await r;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
    const bytes = res.body as Buffer;
    const text = bytes.toString('utf8');
    return { status: res.status, headers, text, json: parseJson(text), bytes };
  };
}
