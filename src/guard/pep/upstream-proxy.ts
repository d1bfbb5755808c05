import http from 'node:http';
import https from 'node:https';
import type { Request, Response } from 'express';
import type { AppContext } from '../../context';
import { clientIp, sendGuardError } from '../http/respond';
import { UpstreamFailure } from './errors';
import type { PepSettings } from './settings';

/** RFC 9110 §7.6.1 hop-by-hop headers, and what only the guard may see (credentials, proofs). */
const NOT_FORWARDED_UP = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'authorization', 'dpop', 'popp']);
const NOT_FORWARDED_DOWN = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'svc-api-version', 'svc-cause']);

/**
 * Proxy mode (UPSTREAM_URL): the checked request goes to a separate FHIR server
 * with the identity headers the enforcement point set and an RFC 7239 `Forwarded` element
 * appended (ZETA A_28439). An upstream answer carrying `svc-cause: Proxy` asks the proxy to hide
 * it: the client gets a 500 error object instead (A_26974-01, UC26).
 */
export function upstreamProxy(ctx: AppContext, settings: PepSettings) {
  const base = new URL(settings.upstreamUrl!);
  const client = base.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true });
  const publicUrl = new URL(settings.publicUrl);
  return (req: Request, res: Response) => {
    // The path after /fhir exactly as received: `POST /fhir` stays the base itself.
    const target = `${base.pathname.replace(/\/+$/, '')}${req.originalUrl.slice(req.baseUrl.length)}`;
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!NOT_FORWARDED_UP.has(k) && v !== undefined) headers[k] = v;
    headers.host = base.host;
    headers.forwarded = appendForwarded(req.headers.forwarded, { for: clientIp(req), host: publicUrl.host, proto: publicUrl.protocol.slice(0, -1), by: '_svc-pep' });
    const buffered = typeof req.body === 'string' || Buffer.isBuffer(req.body) ? Buffer.from(req.body as string) : undefined;
    if (buffered) {
      headers['content-length'] = String(buffered.length);
      delete headers['transfer-encoding'];
    }
    const upstream = client.request(
      { protocol: base.protocol, hostname: base.hostname, port: base.port, method: req.method, path: target, headers, agent, timeout: settings.upstreamTimeoutMs },
      (up) => {
        if (String(up.headers['svc-cause'] ?? '').trim().toLowerCase() === 'proxy') {
          up.resume();
          ctx.logger.warn({ requestId: res.locals.requestId, status: up.statusCode }, 'upstream asked to hide its answer (svc-cause: Proxy)');
          sendGuardError(res, settings.issuer, new UpstreamFailure('the protected resource failed'));
          return;
        }
        res.status(up.statusCode ?? 502);
        for (const [k, v] of Object.entries(up.headers)) if (!NOT_FORWARDED_DOWN.has(k) && v !== undefined) res.setHeader(k, v);
        up.pipe(res);
      },
    );
    upstream.on('timeout', () => upstream.destroy(new Error('upstream timeout')));
    upstream.on('error', (err) => {
      ctx.logger.warn({ requestId: res.locals.requestId, err: err.message }, 'upstream request failed');
      if (!res.headersSent) sendGuardError(res, settings.issuer, new UpstreamFailure('the protected resource is not reachable', 502));
      else res.destroy();
    });
    if (buffered) upstream.end(buffered);
    else req.pipe(upstream);
  };
}

/** RFC 7239 §4: `for=…;host=…;proto=…;by=…` appended to what earlier proxies wrote; values that are not tokens are quoted. */
function appendForwarded(existing: string | undefined, element: Record<string, string>): string {
  const pairs = Object.entries(element).map(([k, v]) => {
    const value = k === 'for' && v.includes(':') ? `[${v}]` : v;
    return `${k}=${/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value) ? value : `"${value.replace(/(["\\])/g, '\\$1')}"`}`;
  });
  const ours = pairs.join(';');
  return existing && existing.trim() ? `${existing.trim()}, ${ours}` : ours;
}
