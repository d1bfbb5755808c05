import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { postNotification, RESPONSE_BODY_CAP } from '../../src/subscriptions/rest-hook';
import { endpointProblem } from '../../src/subscriptions/endpoint-policy';
import { maskChannelHeader, parseChannelHeader } from '../../src/subscriptions/channel-headers';

/** A loopback server whose answer the test decides. */
async function serve(handler: http.RequestListener): Promise<{ url: string; server: http.Server; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('outgoing rest-hook requests (ISiK point 7)', () => {
  test('a receiver that does not answer within the timeout: no-response, after about the timeout', async () => {
    const s = await serve(() => undefined);
    try {
      const started = Date.now();
      const result = await postNotification(s.url, '{}', 'application/fhir+json', [], 300);
      const took = Date.now() - started;
      expect(result).toEqual({ ok: false, code: 'no-response', detail: 'no answer within 300 ms' });
      expect(took).toBeGreaterThanOrEqual(280);
      expect(took).toBeLessThan(2000);
    } finally {
      await s.close();
    }
  });

  test('a receiver that streams an endless body: the answer counts, the body is not read beyond the cap', async () => {
    let written = 0;
    let markClosed: (early: boolean) => void = () => undefined;
    const closed = new Promise<boolean>((r) => (markClosed = r));
    const s = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = () => {
        while (written < 200 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      res.on('close', () => markClosed(written < 200 * 1024 * 1024));
      pump();
    });
    try {
      const result = await postNotification(s.url, '{}', 'application/fhir+json', [], 5000);
      expect(result).toEqual({ ok: true, status: 200 });
      // The server sees the close once the client's destroy reaches it; on a busy machine that is not within a fixed delay.
      expect(await closed).toBe(true);
      expect(RESPONSE_BODY_CAP).toBeLessThanOrEqual(4096);
    } finally {
      await s.close();
    }
  });

  test('redirects are not followed: 3xx is error-response', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(307, { location: 'http://127.0.0.1:1/elsewhere' });
      res.end();
    });
    try {
      expect(await postNotification(s.url, '{}', 'application/fhir+json', [], 1000)).toEqual({ ok: false, code: 'error-response', detail: 'HTTP 307' });
    } finally {
      await s.close();
    }
  });

  test('Content-Type is the channel payload and every channel header is sent', async () => {
    let seen: http.IncomingHttpHeaders = {};
    const s = await serve((req, res) => {
      seen = req.headers;
      req.resume();
      req.on('end', () => res.end());
    });
    try {
      await postNotification(s.url, '<Bundle/>', 'application/fhir+xml', [{ name: 'Authorization', value: 'Basic abc' }, { name: 'X-Trace', value: '1' }], 1000);
      expect(seen['content-type']).toBe('application/fhir+xml');
      expect(seen.authorization).toBe('Basic abc');
      expect(seen['x-trace']).toBe('1');
    } finally {
      await s.close();
    }
  });

  test('a header name given twice, also in another case: each value is its own field line, in order', async () => {
    let raw: string[] = [];
    const s = await serve((req, res) => {
      raw = req.rawHeaders;
      req.resume();
      req.on('end', () => res.end());
    });
    try {
      const result = await postNotification(s.url, '{}', 'application/fhir+json', [{ name: 'X-Tenant', value: 'a' }, { name: 'x-tenant', value: 'b' }, { name: 'X-TENANT', value: 'c' }], 1000);
      expect(result).toEqual({ ok: true, status: 200 });
      const lines = raw.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === 'x-tenant' ? [`${v}: ${raw[i + 1]}`] : []));
      expect(lines).toEqual(['X-Tenant: a', 'X-Tenant: b', 'X-Tenant: c']);
    } finally {
      await s.close();
    }
  });

  test.each([
    ['https://portal.example.org/notify', false, undefined],
    ['http://127.0.0.1:8080/notify', false, undefined],
    ['http://localhost/notify', false, undefined],
    ['http://[::1]:9000/notify', false, undefined],
    ['http://127.0.0.1:8080/notify', true, 'channel.endpoint must use https in production'],
    ['http://10.0.0.1/notify', false, 'channel.endpoint may use http only for the loopback interface (127.0.0.1, ::1, localhost)'],
    ['https://portal.example.org/notify', true, undefined],
    ['https://127.0.0.1/notify', true, 'channel.endpoint must not address loopback, link-local or private networks in production'],
    ['https://10.1.2.3/notify', true, 'channel.endpoint must not address loopback, link-local or private networks in production'],
    ['https://169.254.169.254/latest', true, 'channel.endpoint must not address loopback, link-local or private networks in production'],
    ['https://[fd00::1]/notify', true, 'channel.endpoint must not address loopback, link-local or private networks in production'],
    ['https://127.0.0.1/notify', false, undefined],
  ])('endpoint %s (production %s): %s', (endpoint, production, problem) => {
    expect(endpointProblem(endpoint, production)).toBe(problem);
  });

  test('masking keeps the header name, the scheme and the last five characters', () => {
    expect(maskChannelHeader(parseChannelHeader('Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=='))).toBe('Authorization: Basic ****yMw==');
    expect(maskChannelHeader(parseChannelHeader('X-Api-Key: 0123456789abcdef'))).toBe('X-Api-Key: ****bcdef');
  });

  test('short secrets show no characters', () => {
    expect(maskChannelHeader(parseChannelHeader('X-Key: abc123'))).toBe('X-Key: ****');
  });
});
