import crypto from 'node:crypto';
import request from 'supertest';
import { guardHarness, type Harness } from './helpers/harness';

/**
 * TRUST_PROXY (Express `trust proxy`): behind a load balancer in its own container the per-IP
 * limit and the policy's ip_address must see the client, not the balancer. supertest connects
 * from 127.0.0.1, which plays the balancer here: trusted with TRUST_PROXY=127.0.0.1/8 (an address
 * range, not the `loopback` name), untrusted with TRUST_PROXY=192.168.0.0/16.
 */
const randomIp = () => `198.51.100.${crypto.randomInt(1, 255)}`;
const LIMIT = 4;

async function remaining(h: Harness, headers: Record<string, string>): Promise<number> {
  const res = await request(h.app).get('/svc/v1/nonce').set(headers);
  expect(res.status).toBe(200);
  return Number(res.headers['x-rate-limit-remaining']);
}

describe.each([
  ['X-Forwarded-For', (ip: string) => ({ 'X-Forwarded-For': ip })],
  ['Forwarded', (ip: string) => ({ Forwarded: `for=${ip}` })],
])('client address from %s', (_name, header) => {
  test('a trusted proxy (TRUST_PROXY=127.0.0.1/8): two clients get separate buckets', async () => {
    // Counters in this test's own schema (no Redis): deterministic however often the suite runs.
    const h = await guardHarness({ env: { TRUST_PROXY: '127.0.0.1/8', RATE_LIMIT_PER_IP: String(LIMIT) }, redis: false });
    try {
      const a = randomIp();
      const b = `203.0.113.${crypto.randomInt(1, 255)}`;
      expect(await remaining(h, header(a))).toBe(LIMIT - 1);
      expect(await remaining(h, header(a))).toBe(LIMIT - 2);
      expect(await remaining(h, header(b))).toBe(LIMIT - 1);
    } finally {
      await h.close();
    }
  });

  test('an untrusted proxy (TRUST_PROXY=192.168.0.0/16): the header is ignored, one bucket for the peer', async () => {
    const h = await guardHarness({ env: { TRUST_PROXY: '192.168.0.0/16', RATE_LIMIT_PER_IP: String(LIMIT) }, redis: false });
    try {
      expect(await remaining(h, header(randomIp()))).toBe(LIMIT - 1);
      expect(await remaining(h, header(`203.0.113.${crypto.randomInt(1, 255)}`))).toBe(LIMIT - 2);
    } finally {
      await h.close();
    }
  });
});

test('X-Forwarded-For is resolved through trusted hops only: a spoofed left-most entry does not count', async () => {
  const h = await guardHarness({ env: { TRUST_PROXY: '127.0.0.1/8', RATE_LIMIT_PER_IP: String(LIMIT) }, redis: false });
  try {
    const client = randomIp();
    // The balancer appends the peer it saw; whatever the client wrote before it is untrusted.
    expect(await remaining(h, { 'X-Forwarded-For': `10.9.9.9, ${client}` })).toBe(LIMIT - 1);
    expect(await remaining(h, { 'X-Forwarded-For': `10.8.8.8, ${client}` })).toBe(LIMIT - 2);
  } finally {
    await h.close();
  }
});
