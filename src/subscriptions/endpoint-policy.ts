import net from 'node:net';

/**
 * Where rest-hook notifications may go: `https` always; `http` only to the
 * loopback interface and only outside production (a receiver on the same machine in development).
 * In production an endpoint may not name this machine or a private network by address either
 * (the server would otherwise POST into networks its clients cannot reach); names are not
 * resolved here.
 */
export function endpointProblem(endpoint: string | undefined, production: boolean): string | undefined {
  if (!endpoint) return 'channel.endpoint is required for a rest-hook channel';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return `channel.endpoint "${endpoint.slice(0, 80)}" is not an absolute URL`;
  }
  if (url.username || url.password) return 'channel.endpoint must not carry credentials; use channel.header';
  if (url.protocol === 'https:') {
    return production && isInternal(url.hostname) ? 'channel.endpoint must not address loopback, link-local or private networks in production' : undefined;
  }
  if (url.protocol !== 'http:') return `channel.endpoint must use https (got ${url.protocol})`;
  if (production) return 'channel.endpoint must use https in production';
  if (!isLoopback(url.hostname)) return 'channel.endpoint may use http only for the loopback interface (127.0.0.1, ::1, localhost)';
  return undefined;
}

function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost') return true;
  if (net.isIPv4(host)) return host.startsWith('127.');
  return net.isIPv6(host) && host === '::1';
}

function isInternal(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (net.isIPv4(host)) {
    const [a, b] = host.split('.').map(Number);
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127);
  }
  if (net.isIPv6(host)) return host === '::' || host === '::1' || /^f[cd]/.test(host) || /^fe[89ab]/.test(host) || host.startsWith('::ffff:');
  return false;
}
