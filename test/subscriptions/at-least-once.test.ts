import request from 'supertest';
import { createApp } from '../../src/app';
import { startSubscriptions, stopSubscriptions } from '../../src/subscriptions';
import { fanOut } from '../../src/subscriptions/fan-out';
import { asFhir, owner } from '../booking/builders';
import { createTestContext } from '../helpers/context';
import { activeSubscription, book, FAST, freshPatient, notificationEvents, Receiver, statusOf, subscription, subscriptionFixture, type SubscriptionFixture } from './helpers';

const confirm = {
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'booked' }] }],
};

/**
 * A process that committed an appointment change and died before delivering it: two contexts on
 * one database stand for the process before and after the restart.
 */
describe('at-least-once delivery across a restart (ISiK point 4)', () => {
  let first: SubscriptionFixture;
  let receiver: Receiver;
  beforeAll(async () => {
    first = await subscriptionFixture();
    receiver = await new Receiver().start();
  });
  afterAll(async () => {
    await receiver.stop();
    await first.close();
  });

  test.each([
    ['the outbox event was committed but not yet fanned out', false],
    ['the event was numbered but not yet delivered', true],
  ])('%s: the next process delivers it', async (_label, numbered) => {
    const pat = await freshPatient(first);
    const path = `/restart-${numbered ? 'numbered' : 'outbox'}`;
    await startSubscriptions(first.ctx, FAST).tick();
    const sub = await activeSubscription(first, subscription(receiver.url(path), { filter: `Appointment?patient=${pat}` }));
    // The first process stops delivering (it is about to die) and commits the change.
    await stopSubscriptions(first.ctx);
    const booked = await book(first, 'manual-schedule', pat);
    expect((await asFhir(first, { method: 'PATCH', path: ['Appointment', booked.body.id], body: confirm }, owner())).status).toBe(200);
    if (numbered) expect([...(await fanOut(first.ctx))]).toContain(sub.id);
    expect(receiver.ofType('event-notification', path)).toHaveLength(0);

    // The restarted process: same database, a context and delivery loop of its own.
    const second = await createTestContext({ db: first.ctx.db });
    try {
      startSubscriptions(second, FAST);
      const [n] = await receiver.waitFor('event-notification', 1, path);
      expect(notificationEvents(statusOf(n.bundle!))).toEqual([{ number: '1', focus: `http://localhost:8080/fhir/Appointment/${booked.body.id}` }]);
      expect((await request(createApp(second)).get(`/fhir/Subscription/${sub.id}`)).body.status).toBe('active');
    } finally {
      await stopSubscriptions(second);
    }
  });

  test('two replicas on one database: every notification exactly once, in order', async () => {
    const pat = await freshPatient(first);
    startSubscriptions(first.ctx, FAST);
    const other = await createTestContext({ db: first.ctx.db });
    try {
      startSubscriptions(other, FAST);
      await activeSubscription(first, subscription(receiver.url('/replicas'), { filter: `Appointment?patient=${pat}` }));
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const booked = await book(first, 'manual-schedule', pat);
        ids.push(booked.body.id);
        // Alternate the replica that takes the write.
        const app = i % 2 === 0 ? first.app : createApp(other);
        const res = await request(app)
          .patch(`/fhir/Appointment/${booked.body.id}`)
          .set('Content-Type', 'application/fhir+json')
          .send(JSON.stringify(confirm));
        expect(res.status).toBe(200);
      }
      const got = await receiver.waitFor('event-notification', 5, '/replicas');
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.ofType('event-notification', '/replicas')).toHaveLength(5);
      expect(got.map((r) => notificationEvents(statusOf(r.bundle!))[0])).toEqual(
        ids.map((id, i) => ({ number: String(i + 1), focus: `http://localhost:8080/fhir/Appointment/${id}` })),
      );
      expect(receiver.ofType('handshake', '/replicas')).toHaveLength(1);
    } finally {
      await stopSubscriptions(other);
    }
  });
});
