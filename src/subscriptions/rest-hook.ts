import http from 'node:http';
import https from 'node:https';
import type { DeliveryErrorCode } from './backport';
import type { ChannelHeader } from './channel-headers';

/** Bytes of a receiver's response body read at most (for the log); the rest is discarded. */
export const RESPONSE_BODY_CAP = 1024;

export type PostResult = { ok: true; status: number } | { ok: false; code: DeliveryErrorCode; detail: string };

/**
 * A connection per notification: notifications to one endpoint are minutes apart, and a pooled
 * socket the receiver closed meanwhile would fail the next attempt (ECONNRESET) for nothing.
 */
const agents = { http: new http.Agent({ keepAlive: false, maxSockets: 16 }), https: new https.Agent({ keepAlive: false, maxSockets: 16 }) };

/**
 * Every channel.header is sent: names repeated (in any case) become one field line each, in the
 * order given, under the first spelling of the name (Node merges header names case-insensitively).
 */
function fieldLines(headers: ChannelHeader[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  const spelling = new Map<string, string>();
  for (const h of headers) {
    const key = h.name.toLowerCase();
    if (!spelling.has(key)) spelling.set(key, h.name);
    const name = spelling.get(key)!;
    byName.set(name, [...(byName.get(name) ?? []), h.value]);
  }
  return byName;
}

/**
 * One rest-hook POST (backport "channels"): Content-Type = `channel.payload`, every
 * `channel.header` as an HTTP header. 2xx is success; a connection or timeout failure is
 * `no-response` (`dns-resolution-error` when the name does not resolve), any other status
 * `error-response`. The whole exchange is bounded by `timeoutMs`; no redirects are followed.
 */
export function postNotification(endpoint: string, body: string, contentType: string, headers: ChannelHeader[], timeoutMs: number): Promise<PostResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const url = new URL(endpoint);
    const outgoing: Record<string, string | string[]> = {};
    for (const [name, values] of fieldLines(headers)) outgoing[name] = values;
    outgoing['Content-Type'] = contentType;
    outgoing['Content-Length'] = String(Buffer.byteLength(body));
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, { method: 'POST', headers: outgoing, agent: url.protocol === 'https:' ? agents.https : agents.http }, (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        // Never buffer a receiver's body: stop reading once past the cap.
        if (read > RESPONSE_BODY_CAP) res.destroy();
      });
      const status = res.statusCode ?? 0;
      const finish = () => done(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, code: 'error-response', detail: `HTTP ${status}` });
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
    });
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, code: 'no-response', detail: `no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    timer.unref?.();
    req.on('error', (err: NodeJS.ErrnoException) => {
      const dns = err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN';
      done({ ok: false, code: dns ? 'dns-resolution-error' : 'no-response', detail: err.code ?? err.message });
    });
    req.end(body);
  });
}
