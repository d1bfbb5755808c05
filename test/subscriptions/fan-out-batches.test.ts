import { asFhir, owner } from '../booking/builders';
import { statementRecorder } from '../helpers/statements';
import { activeSubscription, book, CONFIRM, freshPatient, notificationEvents, Receiver, statusOf, subscription, subscriptionFixture, type SubscriptionFixture } from './helpers';

const SUBSCRIBERS = 40;

/**
 * One event to many subscribers (the 1,000-subscriber fan-out): every subscriber gets
 * its notification once, and the acknowledgements that arrive together are recorded together,
 * not one statement per endpoint.
 */
describe('fan-out of one event to many subscriptions', () => {
  let f: SubscriptionFixture;
  let receiver: Receiver;
  beforeAll(async () => {
    // Forty endpoints share one receiver (16 sockets per origin): on a loaded machine a notification
    // may wait its turn well past the fast test timeout, which would count as a failed attempt.
    f = await subscriptionFixture({ settings: { timeoutMs: 20_000, maxTimeoutMs: 30_000 } });
    receiver = await new Receiver().start();
  });
  afterAll(async () => {
    await receiver.stop();
    await f.close();
  });

  test(`${SUBSCRIBERS} subscribers: one notification each, acknowledgements written in batches`, async () => {
    const pat = await freshPatient(f);
    const paths = Array.from({ length: SUBSCRIBERS }, (_, i) => `/fan-${i}`);
    const subs = await Promise.all(paths.map((p) => activeSubscription(f, subscription(receiver.url(p), { filter: `Appointment?patient=${pat}` }), 60_000)));
    const recorder = statementRecorder();
    recorder.start();
    try {
      const booked = await book(f, 'manual-schedule', pat);
      expect(booked.status).toBe(202);
      expect((await asFhir(f, { method: 'PATCH', path: ['Appointment', booked.body.id], body: CONFIRM }, owner())).status).toBe(200);
      for (const p of paths) await receiver.waitFor('event-notification', 1, p, 60_000);
      await f.dispatcher.tick();
    } finally {
      recorder.stop();
    }
    for (const p of paths) {
      const got = receiver.ofType('event-notification', p);
      expect(got).toHaveLength(1);
      expect(notificationEvents(statusOf(got[0].bundle!))[0].number).toBe('1');
    }
    const acknowledgements = recorder.sent.filter((s) => /UPDATE subscription_channel SET failures = 0/.test(s));
    expect(acknowledgements.length).toBeGreaterThan(0);
    expect(acknowledgements.length).toBeLessThan(SUBSCRIBERS);
    // Every subscription recorded the delivery and holds no lease.
    const { rows } = await f.ctx.db.query<{ n: string }>(
      'SELECT count(*) AS n FROM subscription_channel WHERE id = ANY($1::text[]) AND delivered_through = 1 AND lease_until IS NULL',
      [subs.map((s) => s.id)],
    );
    expect(Number(rows[0].n)).toBe(SUBSCRIBERS);
  });
});
