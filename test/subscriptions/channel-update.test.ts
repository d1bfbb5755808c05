import request from 'supertest';
import type { Subscription } from '@medplum/fhirtypes';
import { asFhir, FHIR_JSON, owner } from '../booking/builders';
import { book, CONFIRM, freshPatient, notificationEvents, Receiver, statusOf, subscription, subscriptionFixture, subscriptionStatusAfter, type SubscriptionFixture } from './helpers';

const BASE = 'http://localhost:8080/fhir';
const PAYLOAD_CONTENT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content';
describe('updating the channel of a Subscription (backport "channels")', () => {
  let f: SubscriptionFixture;
  let receiver: Receiver;
  beforeAll(async () => {
    // Retries 400 ms apart doubling: the subscription stays active for the whole test.
    f = await subscriptionFixture({ settings: { backoffMs: 400 } });
    receiver = await new Receiver().start();
  });
  afterAll(async () => {
    await receiver.stop();
    await f.close();
  });

  const create = (sub: unknown) => request(f.app).post('/fhir/Subscription').set('Content-Type', FHIR_JSON).send(JSON.stringify(sub));
  const update = (sub: Subscription) => request(f.app).put(`/fhir/Subscription/${sub.id}`).set('Content-Type', FHIR_JSON).send(JSON.stringify(sub));

  test('an active subscription given a new Authorization header: handshake, then the event that was retrying is delivered with it', async () => {
    const oldToken = 'Bearer old-token-0123456789';
    const newToken = 'Bearer new-token-9876543210';
    const path = '/rotated';
    const pat = await freshPatient(f);
    receiver.answer = (got) => (got.path !== path || got.headers.authorization === oldToken ? 200 : 401);
    const created = await create(subscription(receiver.url(path), { filter: `Appointment?patient=${pat}`, header: [`Authorization: ${oldToken}`] }));
    expect(created.status).toBe(201);
    const active = await subscriptionStatusAfter(f, created.body.id, 'active');
    expect(active.status).toBe('active');

    // The receiver rotates its credentials; the event committed now is refused and retried.
    receiver.answer = (got) => (got.path !== path || got.headers.authorization === newToken ? 200 : 401);
    const booked = await book(f, 'manual-schedule', pat);
    expect((await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.body.id], body: CONFIRM }, owner())).status).toBe(200);
    const [refused] = await receiver.waitFor('event-notification', 1, path);
    expect(refused.headers.authorization).toBe(oldToken);
    const retrying = await request(f.app).get(`/fhir/Subscription/${active.id}`);
    expect(retrying.body.status).toBe('active');

    const put = await update({ ...(retrying.body as Subscription), channel: { ...retrying.body.channel, header: [`Authorization: ${newToken}`] } });
    expect(put.status).toBe(200);
    expect(put.body.status).toBe('requested');
    const handshakes = await receiver.waitFor('handshake', 2, path);
    expect(handshakes[1].headers.authorization).toBe(newToken);
    const delivered = await waitForNotificationWith(receiver, path, newToken);
    expect(notificationEvents(statusOf(delivered.bundle!))).toEqual([{ number: '1', focus: `${BASE}/Appointment/${booked.body.id}` }]);
    expect((await subscriptionStatusAfter(f, active.id!, 'active')).status).toBe('active');
  });

  test('a subscription reactivated from error skips the events numbered meanwhile (they stay in $events)', async () => {
    const path = '/from-error';
    const pat = await freshPatient(f);
    receiver.answer = (got) => (got.path === path ? 503 : 200);
    const created = await create(subscription(receiver.url(path), { filter: `Appointment?patient=${pat}` }));
    const errored = await subscriptionStatusAfter(f, created.body.id, 'error');
    expect(errored.status).toBe('error');
    const booked = await book(f, 'manual-schedule', pat);
    expect((await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.body.id], body: CONFIRM }, owner())).status).toBe(200);
    await f.dispatcher.tick();
    receiver.answer = undefined;
    const on = await update({ ...errored, status: 'requested' });
    expect(on.status).toBe(200);
    await receiver.waitFor('handshake', 2, path);
    expect((await subscriptionStatusAfter(f, errored.id!, 'active')).status).toBe('active');
    await f.dispatcher.tick();
    expect(receiver.ofType('event-notification', path)).toHaveLength(0);
    const events = await request(f.app).get(`/fhir/Subscription/${errored.id}/$events`);
    expect(notificationEvents(statusOf(events.body))).toEqual([{ number: '1', focus: `${BASE}/Appointment/${booked.body.id}` }]);
  });

  test('repeated header names, in any case: every channel.header reaches the receiver', async () => {
    const path = '/repeated';
    receiver.answer = undefined;
    const created = await create(subscription(receiver.url(path), { header: ['X-Tenant: klinik-nord', 'x-tenant: klinik-sued', 'Authorization: Bearer only-one-0123456789'] }));
    expect(created.status).toBe(201);
    const [handshake] = await receiver.waitFor('handshake', 1, path);
    expect(handshake.headers['x-tenant']).toBe('klinik-nord, klinik-sued');
    expect(handshake.headers.authorization).toBe('Bearer only-one-0123456789');
  });

  test('no backport-payload-content: accepted as id-only, and the stored Subscription says so', async () => {
    const sub = subscription(receiver.url('/no-content'));
    delete (sub.channel as { _payload?: unknown })._payload;
    const created = await create(sub);
    expect(created.status).toBe(201);
    const idOnly = { extension: [{ url: PAYLOAD_CONTENT, valueCode: 'id-only' }] };
    expect(created.body.channel._payload).toEqual(idOnly);
    const read = await request(f.app).get(`/fhir/Subscription/${created.body.id}`);
    expect(read.body.channel._payload).toEqual(idOnly);
  });
});

async function waitForNotificationWith(receiver: Receiver, path: string, authorization: string, timeoutMs = 8000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const got = receiver.ofType('event-notification', path).find((r) => r.headers.authorization === authorization);
    if (got) return got;
    if (Date.now() > until) throw new Error(`no event-notification with the new Authorization header on ${path}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
