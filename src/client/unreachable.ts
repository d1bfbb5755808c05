/**
 * A request that got no HTTP answer at all: the URL it went to and why (the name, the connection,
 * TLS, or the time limit), instead of undici's bare "fetch failed". The CLI exits 2: nothing was
 * refused, the address or the server's state is wrong.
 */
export class Unreachable extends Error {
  constructor(
    readonly url: string,
    /** The system or TLS error code (ECONNREFUSED, ENOTFOUND, ERR_SSL_WRONG_VERSION_NUMBER, ...). */
    readonly code: string | undefined,
    reason: string,
  ) {
    super(`cannot reach ${url}: ${reason}`);
  }
}

/** Certificate checks of the server's TLS certificate (Node's `tls` and OpenSSL verify codes). */
const CERTIFICATE_CODES = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS_CERT_ALTNAME_INVALID/;
/** The server offers no TLS version this client accepts (it requires TLS 1.3). */
const TLS_VERSION_CODES = /PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|NO_PROTOCOLS_AVAILABLE/;
/** The TLS handshake met something that is not TLS (typically a plain HTTP server). */
const NOT_TLS_CODES = ['ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ERR_SSL_HTTP_REQUEST', 'EPROTO'];

/**
 * An `Unreachable` for a failed fetch (undici's `TypeError: fetch failed` with the socket's error as
 * `cause`, or the time limit's `TimeoutError`); anything else (a caller's abort, a bug) is returned
 * unchanged.
 */
export function unreachable(url: string, err: unknown): unknown {
  const e = err as { name?: string; message?: string; cause?: unknown };
  if (e?.name === 'TimeoutError') return new Unreachable(url, 'ETIMEDOUT', 'no answer within the time limit (the server or a proxy in between hangs)');
  // By name, not instanceof: the fetch of another realm (a VM context, a test sandbox) has its own TypeError.
  if (e?.name !== 'TypeError' || e.message !== 'fetch failed') return err;
  const cause = innermost(e.cause);
  const code = cause?.code;
  const { protocol, hostname, port } = new URL(url);
  const where = `${hostname}:${port || (protocol === 'https:' ? 443 : 80)}`;
  const detail = cause?.message ? `: ${cause.message}` : '';
  let reason: string;
  if (code === 'ECONNREFUSED') reason = `connection refused (ECONNREFUSED): nothing listens on ${where}; is the server running, and are host and port right?`;
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') reason = `the host name ${hostname} cannot be resolved (${code}); is it spelled right?`;
  else if (code?.startsWith('ERR_OCSP_STAPLE_')) reason = `${cause!.message} (${code})`;
  else if (code && TLS_VERSION_CODES.test(code)) reason = `the server at ${where} does not speak TLS 1.3 (${code}): this client requires TLS 1.3 or higher`;
  else if (code && NOT_TLS_CODES.includes(code)) reason = `TLS handshake failed (${code}): the server at ${where} does not speak https; is it an http:// server?`;
  else if (code && CERTIFICATE_CODES.test(code)) reason = `the server's TLS certificate is not accepted (${code}${detail})`;
  else if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE')
    reason = `the connection was closed without an answer (${code})${protocol === 'http:' ? '; if the server speaks https, use an https:// URL' : ''}`;
  else if (code === 'ETIMEDOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH') reason = `no connection to ${where} (${code}); is the host reachable from here?`;
  // Fetch Standard §2.9 "port blocking": fetch refuses these ports before connecting.
  else if (!code && cause?.message === 'bad port') reason = `port ${port} is one that fetch refuses to use (Fetch Standard, port blocking); serve on another port`;
  else reason = `${code ?? 'no answer'}${detail}`;
  return new Unreachable(url, code, reason);
}

/** The socket's own error: undici wraps it, and a host with several addresses gives an AggregateError of them. */
function innermost(cause: unknown): { code?: string; message?: string } | undefined {
  let c = cause as { code?: string; message?: string; cause?: unknown; errors?: unknown[] } | undefined;
  for (let depth = 0; c && depth < 5; depth++) {
    if (c.code && c.code !== 'ERR_ASSERTION') return c;
    c = (c.errors?.[0] ?? c.cause) as typeof c;
  }
  return c;
}
