import request from 'supertest';
import type { Bundle, Parameters, Subscription } from '@medplum/fhirtypes';
import { FHIR_JSON } from '../booking/builders';
import { param, Receiver, sleep, statusOf, subscription, subscriptionFixture, type SubscriptionFixture } from './helpers';

async function create(f: SubscriptionFixture, sub: Subscription): Promise<request.Response> {
  return request(f.app).post('/fhir/Subscription').set('Content-Type', FHIR_JSON).send(JSON.stringify(sub));
}

async function statusAfter(f: SubscriptionFixture, id: string, wanted: string, timeoutMs = 8000): Promise<Subscription> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await request(f.app).get(`/fhir/Subscription/${id}`);
    if (res.body.status === wanted || Date.now() > until) return res.body as Subscription;
    await sleep(25);
  }
}

describe('Subscription lifecycle (backport channels, ISiK points 3 and 9)', () => {
  let f: SubscriptionFixture;
  let receiver: Receiver;
  beforeAll(async () => {
    f = await subscriptionFixture();
    receiver = await new Receiver().start();
  });
  afterAll(async () => {
    await receiver.stop();
    await f.close();
  });

  test('created requested whatever the client sent; handshake 200 turns it active', async () => {
    const res = await create(f, { ...subscription(receiver.url('/handshake')), status: 'active' });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('requested');
    const [handshake] = await receiver.waitFor('handshake', 1, '/handshake');
    const p = statusOf(handshake.bundle!);
    expect(handshake.bundle!.type).toBe('history');
    expect(param(p, 'status')?.valueCode).toBe('requested');
    expect(param(p, 'events-since-subscription-start')?.valueString).toBe('0');
    expect(param(p, 'subscription')?.valueReference).toEqual({ reference: `http://localhost:8080/fhir/Subscription/${res.body.id}` });
    expect((await statusAfter(f, res.body.id, 'active')).status).toBe('active');
    // query-status names the last successful delivery on its status parameter (Terminus extension),
    // recorded in the transaction that made it active: there from the moment it reads active.
    const st = await request(f.app).get(`/fhir/Subscription/${res.body.id}/$status`);
    const status = param((st.body as Bundle).entry![0].resource as Parameters, 'status') as { extension?: { url: string; valueInstant: string }[] };
    expect(status.extension).toEqual([{ url: 'http://terminus.local/fhir/StructureDefinition/subscription-last-delivery', valueInstant: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }]);
  });

  test('a handshake answered 500 turns it error with error parameter error-response', async () => {
    const failing = await new Receiver().start();
    failing.status = 500;
    try {
      const res = await create(f, subscription(failing.url()));
      expect(res.status).toBe(201);
      const sub = await statusAfter(f, res.body.id, 'error');
      expect(sub.status).toBe('error');
      expect(sub.error).toMatch(/HTTP 500/);
      const st = await request(f.app).get(`/fhir/Subscription/${res.body.id}/$status`);
      expect(st.status).toBe(200);
      const p = (st.body as Bundle).entry![0].resource as Parameters;
      expect(param(p, 'status')?.valueCode).toBe('error');
      expect(param(p, 'status')?.extension).toBeUndefined();
      expect(param(p, 'error')?.valueCodeableConcept).toEqual({ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/subscription-error', code: 'error-response' }] });
    } finally {
      await failing.stop();
    }
  });

  test('an endpoint nobody listens on turns it error with no-response', async () => {
    const gone = await new Receiver().start();
    const url = gone.url();
    await gone.stop();
    const res = await create(f, subscription(url));
    const sub = await statusAfter(f, res.body.id, 'error');
    expect(sub.status).toBe('error');
    const st = await request(f.app).get(`/fhir/Subscription/${res.body.id}/$status`);
    expect(param((st.body as Bundle).entry![0].resource as Parameters, 'error')?.valueCodeableConcept).toEqual({
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/subscription-error', code: 'no-response' }],
    });
  });

  test('the client reactivates an errored subscription by updating its status; a new handshake follows', async () => {
    const flaky = await new Receiver().start();
    flaky.status = 503;
    try {
      const res = await create(f, subscription(flaky.url()));
      const errored = await statusAfter(f, res.body.id, 'error');
      expect(errored.status).toBe('error');
      flaky.status = 200;
      const put = await request(f.app).put(`/fhir/Subscription/${res.body.id}`).set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...errored, status: 'requested' }));
      expect(put.status).toBe(200);
      expect(put.body.status).toBe('requested');
      expect((await statusAfter(f, res.body.id, 'active')).status).toBe('active');
      expect(flaky.ofType('handshake')).toHaveLength(2);
    } finally {
      await flaky.stop();
    }
  });

  test('channel.header is masked on read yet sent in clear to the receiver', async () => {
    const secret = 'Basic dXNlcjpzZWhyLWdlaGVpbS0xMjM0NQ==';
    const res = await create(f, subscription(receiver.url('/with-header'), { header: [`Authorization: ${secret}`, 'X-Portal-Key: k-0123456789abcdef'] }));
    expect(res.status).toBe(201);
    expect(res.body.channel.header).toEqual(['Authorization: Basic ****0NQ==', 'X-Portal-Key: ****bcdef']);
    const read = await request(f.app).get(`/fhir/Subscription/${res.body.id}`);
    expect(read.body.channel.header).toEqual(['Authorization: Basic ****0NQ==', 'X-Portal-Key: ****bcdef']);
    expect(JSON.stringify(read.body)).not.toContain('dXNlcjpzZWhy');
    const [handshake] = await receiver.waitFor('handshake', 1, '/with-header');
    expect(handshake.headers.authorization).toBe(secret);
    expect(handshake.headers['x-portal-key']).toBe('k-0123456789abcdef');
    const { rows } = await f.ctx.db.query<{ headers_sealed: string }>('SELECT headers_sealed FROM subscription_channel WHERE id = $1', [res.body.id]);
    expect(rows[0].headers_sealed).not.toContain('dXNlcjpzZWhy');
  });

  test('an update that sends the masked header back keeps the secret', async () => {
    const secret = 'Bearer token-abcdefghijklmnop';
    const res = await create(f, subscription(receiver.url('/keep-header'), { header: [`Authorization: ${secret}`] }));
    const active = await statusAfter(f, res.body.id, 'active');
    const put = await request(f.app)
      .put(`/fhir/Subscription/${res.body.id}`)
      .set('Content-Type', FHIR_JSON)
      .send(JSON.stringify({ ...active, reason: 'geänderter Grund' }));
    expect(put.status).toBe(200);
    expect(put.body.status).toBe('active');
    expect(put.body.channel.header).toEqual(['Authorization: Bearer ****lmnop']);
    const { rows } = await f.ctx.db.query<{ headers_sealed: string }>('SELECT headers_sealed FROM subscription_channel WHERE id = $1', [res.body.id]);
    const { openHeaders } = await import('../../src/subscriptions/channel-headers');
    const { keyEncryptionFor } = await import('../../src/guard');
    expect(openHeaders(keyEncryptionFor(f.ctx), rows[0].headers_sealed)).toEqual([{ name: 'Authorization', value: secret }]);
  });

  test('Content-Type equals channel.payload: application/fhir+xml gets an XML Bundle', async () => {
    const res = await create(f, subscription(receiver.url('/xml'), { payload: 'application/fhir+xml' }));
    expect(res.status).toBe(201);
    const until = Date.now() + 8000;
    while (!receiver.received.some((r) => r.path === '/xml') && Date.now() < until) await sleep(20);
    const got = receiver.received.find((r) => r.path === '/xml')!;
    expect(got.headers['content-type']).toBe('application/fhir+xml');
    expect(got.text).toMatch(/^(<\?xml[^>]*>)?<Bundle xmlns="http:\/\/hl7.org\/fhir">/);
    expect(got.text).toContain('<valueCode value="handshake"/>');
  });

  test('Content-Type equals channel.payload: application/fhir+json', async () => {
    const [h] = await receiver.waitFor('handshake', 1, '/handshake');
    expect(h.headers['content-type']).toBe('application/fhir+json');
  });
});
