import { GuardClient, SoftwareCard, createDpopProof, fetchTransport } from '../../src/client';
import type { createCardCa } from '../../src/guard/pki/dev-pki';
import { issueCard } from '../../src/guard/pki/dev-pki';
import type { LoadRequest } from '../lib/load';

/** One request of a scenario, before its DPoP proof: the proof binds method and URL (RFC 9449 §4.2). */
export interface Plain {
  method: string;
  path: string;
  body?: string;
  contentType?: string;
}

interface Login {
  client: GuardClient;
  token: string;
}

/**
 * Logged-in callers for a load: `connections` logins through the real guard (card login, token
 * exchange, DPoP key), one per connection. `institutions` distinct cards, or one card logged in
 * `connections` times (the workers of one booking system, any of which may cancel what another
 * booked: an Appointment belongs to the institution that booked it).
 */
export async function logins(url: string, ca: ReturnType<typeof createCardCa>, connections: number, institution: (i: number) => string): Promise<Login[]> {
  const out: Login[] = [];
  const cards = new Map<string, ReturnType<typeof issueCard>>();
  for (let i = 0; i < connections; i++) {
    const id = institution(i);
    if (!cards.has(id)) cards.set(id, issueCard(ca, { telematikId: id, professionOid: '1.2.276.0.76.4.50', commonName: `Bench ${id}`, organizationName: `Bench ${id}` }));
    const c = cards.get(id)!;
    const client = new GuardClient({ server: url, transport: fetchTransport(), retries: 2 });
    const tokens = await client.login(new SoftwareCard(c.certPem, c.keyPem));
    out.push({ client, token: tokens.accessToken });
  }
  return out;
}

/**
 * A load's requests: `make` names the next request (scenarios share nothing between calls but
 * their own counters); before each run `presign(n)` signs the proofs of the next `n` requests per
 * connection, so the load generator's signing (it shares the server's cores) stays out of the run.
 * Requests signed and not sent stay queued for the next run (a proof is valid 300 s + 60 s leeway).
 */
export function guardedLoad(url: string, callers: Login[], make: (client: number) => Plain | undefined) {
  const queues = callers.map(() => [] as LoadRequest[]);
  const sign = async (i: number, plain: Plain): Promise<LoadRequest> => {
    const c = callers[i];
    const proof = await createDpopProof(c.client.dpopKey!, { method: plain.method, url: `${url}${plain.path.split('?')[0]}`, accessToken: c.token, iat: Math.floor(Date.now() / 1000) });
    const headers: Record<string, string> = { accept: 'application/fhir+json', authorization: `DPoP ${c.token}`, dpop: proof };
    if (plain.contentType) headers['content-type'] = plain.contentType;
    return { method: plain.method, path: plain.path, headers, body: plain.body };
  };
  return {
    /** Requests left to send: those queued; `make` answers undefined once its supply is out. */
    queued: () => queues.reduce((s, q) => s + q.length, 0),
    async presign(perClient: number): Promise<void> {
      for (let i = 0; i < callers.length; i++) {
        while (queues[i].length < perClient) {
          const plain = make(i);
          if (!plain) break;
          queues[i].push(await sign(i, plain));
        }
      }
    },
    next: async (client: number): Promise<LoadRequest> => {
      const pre = queues[client].shift();
      if (pre) return pre;
      const plain = make(client);
      if (plain) return sign(client, plain);
      // The supply is out: another connection's signed request (a request's token and proof do not depend on the TCP connection it takes).
      const other = queues.find((q) => q.length > 0)?.shift();
      if (!other) throw new Error('the scenario ran out of requests: bound the run with maxRequests');
      return other;
    },
  };
}
