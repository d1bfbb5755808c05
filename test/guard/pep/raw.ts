import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestToken } from '../helpers/get-token';
import { pepHarness, proofFor, type PepHarness } from './helpers';

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** An enforcing app listening on 127.0.0.1, for requests whose target supertest or fetch would normalise. */
export interface ListeningPep {
  h: PepHarness;
  base: string;
  close(): Promise<void>;
}

export async function listeningPep(o: Parameters<typeof pepHarness>[0] = {}): Promise<ListeningPep> {
  const h = await pepHarness(o);
  const server = http.createServer(h.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    h,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await h.close();
    },
  };
}

/**
 * Sends the request target byte for byte (latin1 characters as those bytes), with a valid token
 * and a proof whose `htu` is the path as sent.
 */
export async function rawCall(p: ListeningPep, t: TestToken, method: string, target: string): Promise<RawAnswer> {
  const proof = await proofFor(p.h, t.dpopKey, method, target.slice('/fhir'.length).split(/[?#]/)[0], t.accessToken);
  return new Promise((resolve, reject) => {
    const req = http.request(`${p.base}${target}`, { method, headers: { authorization: `DPoP ${t.accessToken}`, dpop: proof, accept: 'application/fhir+json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}
