import { unreachable } from './unreachable';

/** One HTTP exchange as the client library sees it; transports may be fetch, supertest, anything. */
export interface HttpRequest {
  method: string;
  /** Absolute URL as published by the server (PUBLIC_URL based); it is what `htu` and `aud` name. */
  url: string;
  headers: Record<string, string>;
  /** Text, or bytes (ASL frames and handshake messages). */
  body?: string | Buffer;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** Parsed JSON body, or undefined. */
  json: unknown;
  /** The body as bytes (transports that can carry them: fetchTransport does). */
  bytes?: Buffer;
}

export type HttpTransport = (req: HttpRequest) => Promise<HttpResponse>;

/**
 * Global fetch, or the one given (server-tls.ts `serverFetch`, which checks the server's TLS). `connectTo` sends every request to another origin than the published one (the
 * server listens on 127.0.0.1:PORT while PUBLIC_URL names the load balancer), keeping path and query.
 * No answer at all is an `Unreachable` naming the URL and the cause.
 */
export function fetchTransport(opts: { connectTo?: string; timeoutMs?: number; fetch?: typeof fetch } = {}): HttpTransport {
  const send = opts.fetch ?? fetch;
  return async (req) => {
    let url = req.url;
    if (opts.connectTo) {
      const published = new URL(req.url);
      url = `${opts.connectTo.replace(/\/+$/, '')}${published.pathname}${published.search}`;
    }
    let res: Response;
    try {
      res = await send(url, { method: req.method, headers: req.headers, body: req.body, signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000) });
    } catch (err) {
      throw unreachable(url, err);
    }
    const bytes = Buffer.from(await res.arrayBuffer());
    const text = bytes.toString('utf8');
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      headers[k] = v;
    });
    return { status: res.status, headers, text, json: parseJson(text), bytes };
  };
}

export function parseJson(text: string): unknown {
  try {
    return text ? (JSON.parse(text) as unknown) : undefined;
  } catch {
    return undefined;
  }
}
