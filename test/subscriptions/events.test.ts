import request from 'supertest';
import type { Bundle, Parameters } from '@medplum/fhirtypes';
import { asFhir, owner } from '../booking/builders';
import {
  activeSubscription,
  book,
  CANCEL,
  freshPatient,
  notificationEvents,
  param,
  Receiver,
  sleep,
  statusOf,
  subscription,
  subscriptionFixture,
  subscriptionStatusAfter,
  type SubscriptionFixture,
} from './helpers';

const BASE = 'http://localhost:8080/fhir';

const replace = (path: string, value: Record<string, unknown>) => ({
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: path }, { name: 'value', ...value }] }],
});
const confirm = replace('Appointment.status', { valueCode: 'booked' });
const decline = replace('Appointment.status', { valueCode: 'cancelled' });

async function patchAsOwner(f: SubscriptionFixture, id: string, body: unknown): Promise<number> {
  return (await asFhir(f, { method: 'PATCH', path: ['Appointment', id], body }, owner())).status;
}

describe('event notifications (ISiK points 4 and 5)', () => {
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

  test('book on the manual schedule (202 pending), confirm as owner: one appointment-update with focus and event number 1', async () => {
    const pat = await freshPatient(f);
    const sub = await activeSubscription(f, subscription(receiver.url('/confirm'), { filter: `Appointment?patient=${pat}` }));
    const booked = await book(f, 'manual-schedule', pat);
    expect(booked.status).toBe(202);
    expect(booked.body.status).toBe('pending');
    expect(await patchAsOwner(f, booked.body.id, confirm)).toBe(200);
    const [n] = await receiver.waitFor('event-notification', 1, '/confirm');
    await f.dispatcher.tick();
    expect(receiver.ofType('event-notification', '/confirm')).toHaveLength(1);
    const bundle = n.bundle!;
    expect(bundle.type).toBe('history');
    const p = statusOf(bundle);
    expect(param(p, 'topic')?.valueCanonical).toBe('https://gematik.de/fhir/isik/SubscriptionTopic/appointment-update');
    expect(param(p, 'status')?.valueCode).toBe('active');
    expect(param(p, 'events-since-subscription-start')?.valueString).toBe('1');
    expect(notificationEvents(p)).toEqual([{ number: '1', focus: `${BASE}/Appointment/${booked.body.id}` }]);
    expect(bundle.entry![0].request).toEqual({ method: 'GET', url: `${BASE}/Subscription/${sub.id}/$status` });
    expect(bundle.entry![1]).toEqual({
      fullUrl: `${BASE}/Appointment/${booked.body.id}`,
      request: { method: 'PUT', url: `Appointment/${booked.body.id}` },
      response: { status: '200', etag: 'W/"2"' },
    });
    expect(bundle.entry![1].resource).toBeUndefined();
  });

  test('no patient data in the body: only references to the appointment and the subscription', async () => {
    const pat = await freshPatient(f);
    await activeSubscription(f, subscription(receiver.url('/no-phi'), { filter: `Appointment?actor=${pat}` }));
    const booked = await book(f, 'manual-schedule', pat);
    expect(await patchAsOwner(f, booked.body.id, confirm)).toBe(200);
    const [n] = await receiver.waitFor('event-notification', 1, '/no-phi');
    expect(n.text).not.toContain(pat.split('/')[1]);
    expect(n.text).not.toContain('Patient');
    expect(n.text).not.toContain('Test Patient');
    expect(n.headers['content-type']).toBe('application/fhir+json');
  });

  test('decline as owner: appointment-cancel on the cancel topic, nothing on the update topic', async () => {
    const pat = await freshPatient(f);
    await activeSubscription(f, subscription(receiver.url('/cancel'), { topic: CANCEL, filter: `Appointment?patient=${pat}` }));
    await activeSubscription(f, subscription(receiver.url('/update-only'), { filter: `Appointment?patient=${pat}` }));
    const booked = await book(f, 'manual-schedule', pat);
    expect(await patchAsOwner(f, booked.body.id, decline)).toBe(200);
    const [n] = await receiver.waitFor('event-notification', 1, '/cancel');
    const p = statusOf(n.bundle!);
    expect(param(p, 'topic')?.valueCanonical).toBe(CANCEL);
    expect(notificationEvents(p)).toEqual([{ number: '1', focus: `${BASE}/Appointment/${booked.body.id}` }]);
    await f.dispatcher.tick();
    expect(receiver.ofType('event-notification', '/update-only')).toHaveLength(0);
  });

  test('re-booking with cancelled-appt-id: appointment-cancel for the replaced appointment', async () => {
    const pat = await freshPatient(f);
    await activeSubscription(f, subscription(receiver.url('/rebook'), { topic: CANCEL, filter: `Appointment?patient=${pat}` }));
    const old = await book(f, 'Schedule-Read-Example', pat);
    expect(old.status).toBe(201);
    // A second booking, declined: its slot is free again and its shape is the new proposal.
    const declined = await book(f, 'Schedule-Read-Example', pat);
    expect(await patchAsOwner(f, declined.body.id, decline)).toBe(200);
    const again = await request(f.app)
      .post('/fhir/Appointment/$book')
      .set('Content-Type', 'application/fhir+json')
      .send(
        JSON.stringify({
          resourceType: 'Parameters',
          parameter: [
            { name: 'appt-resource', resource: { ...(await request(f.app).get(`/fhir/Appointment/${declined.body.id}`)).body, id: undefined, meta: undefined, status: 'proposed' } },
            { name: 'cancelled-appt-id', valueString: old.body.id },
          ],
        }),
      );
    expect(again.status).toBe(201);
    const got = await receiver.waitFor('event-notification', 2, '/rebook');
    expect(got.map((r) => notificationEvents(statusOf(r.bundle!)))).toEqual([
      [{ number: '1', focus: `${BASE}/Appointment/${declined.body.id}` }],
      [{ number: '2', focus: `${BASE}/Appointment/${old.body.id}` }],
    ]);
  });

  test.each([
    ['patient', (pat: string) => `Appointment?patient=${pat}`],
    ['actor', (pat: string) => `Appointment?actor=${pat}`],
  ])('filter criteria %s: only the matching subscription hears the change', async (name, filterFor) => {
    const mine = await freshPatient(f);
    const other = await freshPatient(f);
    await activeSubscription(f, subscription(receiver.url(`/filter-${name}-mine`), { filter: filterFor(mine) }));
    await activeSubscription(f, subscription(receiver.url(`/filter-${name}-other`), { filter: filterFor(other) }));
    const booked = await book(f, 'manual-schedule', mine);
    expect(await patchAsOwner(f, booked.body.id, confirm)).toBe(200);
    await receiver.waitFor('event-notification', 1, `/filter-${name}-mine`);
    await f.dispatcher.tick();
    expect(receiver.ofType('event-notification', `/filter-${name}-other`)).toHaveLength(0);
  });

  test('a filter parameter the topic does not offer is refused with 422 not-supported', async () => {
    const res = await request(f.app)
      .post('/fhir/Subscription')
      .set('Content-Type', 'application/fhir+json')
      .send(JSON.stringify(subscription(receiver.url(), { filter: 'Appointment?comment=x' })));
    expect(res.status).toBe(422);
    expect(res.body.issue[0].code).toBe('not-supported');
    expect(res.body.issue[0].expression).toEqual(['Subscription.criteria.extension']);
  });

  test('receiver down for a while: notifications arrive after it comes back, in order, with their numbers', async () => {
    const pat = await freshPatient(f);
    const flaky = await new Receiver().start();
    try {
      const sub = await activeSubscription(f, subscription(flaky.url('/down'), { filter: `Appointment?patient=${pat}` }));
      await flaky.stop();
      const first = await book(f, 'manual-schedule', pat);
      const second = await book(f, 'manual-schedule', pat);
      expect(await patchAsOwner(f, first.body.id, confirm)).toBe(200);
      expect(await patchAsOwner(f, second.body.id, confirm)).toBe(200);
      expect(await patchAsOwner(f, first.body.id, replace('Appointment.comment', { valueString: 'Raum 2' }))).toBe(200);
      // Wait until at least two attempts failed, then bring the receiver back on its port.
      for (let i = 0; i < 200; i++) {
        const { rows } = await f.ctx.db.query<{ failures: number }>('SELECT failures FROM subscription_channel WHERE id = $1', [sub.id]);
        if (rows[0].failures >= 2) break;
        await sleep(20);
      }
      await flaky.start();
      const got = await flaky.waitFor('event-notification', 3, '/down');
      expect(got.map((r) => notificationEvents(statusOf(r.bundle!)))).toEqual([
        [{ number: '1', focus: `${BASE}/Appointment/${first.body.id}` }],
        [{ number: '2', focus: `${BASE}/Appointment/${second.body.id}` }],
        [{ number: '3', focus: `${BASE}/Appointment/${first.body.id}` }],
      ]);
      expect((await subscriptionStatusAfter(f, sub.id!, 'active')).status).toBe('active');
    } finally {
      await flaky.stop();
    }
  });

  test('after the last failed attempt the subscription turns error (error-response); events keep their numbers for $events', async () => {
    const pat = await freshPatient(f);
    const failing = await new Receiver().start();
    try {
      const sub = await activeSubscription(f, subscription(failing.url('/fails'), { filter: `Appointment?patient=${pat}` }));
      failing.status = 500;
      const booked = await book(f, 'manual-schedule', pat);
      expect(await patchAsOwner(f, booked.body.id, confirm)).toBe(200);
      const errored = await subscriptionStatusAfter(f, sub.id!, 'error', 15_000);
      expect(errored.status).toBe('error');
      expect(failing.ofType('event-notification')).toHaveLength(f.dispatcher.settings.maxAttempts);
      const st = await request(f.app).get(`/fhir/Subscription/${sub.id}/$status`);
      const p = (st.body as Bundle).entry![0].resource as Parameters;
      expect(param(p, 'error')?.valueCodeableConcept).toEqual({ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/subscription-error', code: 'error-response' }] });
      expect(param(p, 'events-since-subscription-start')?.valueString).toBe('1');
    } finally {
      await failing.stop();
    }
  }, 120_000);

  describe('$status and $events (ISiK points 6 and 7)', () => {
    let subId: string;
    let appointments: string[];
    beforeAll(async () => {
      const pat = await freshPatient(f);
      subId = (await activeSubscription(f, subscription(receiver.url('/ops'), { filter: `Appointment?patient=${pat}` }))).id!;
      appointments = [];
      for (let i = 0; i < 3; i++) {
        const b = await book(f, 'manual-schedule', pat);
        appointments.push(b.body.id);
        expect(await patchAsOwner(f, b.body.id, confirm)).toBe(200);
      }
      await receiver.waitFor('event-notification', 3, '/ops');
    });

    test('instance $status: a searchset with one query-status Parameters', async () => {
      const res = await request(f.app).get(`/fhir/Subscription/${subId}/$status`);
      expect(res.status).toBe(200);
      const bundle = res.body as Bundle;
      expect(bundle.type).toBe('searchset');
      expect(bundle.entry).toHaveLength(1);
      const p = bundle.entry![0].resource as Parameters;
      expect(param(p, 'type')?.valueCode).toBe('query-status');
      expect(param(p, 'status')?.valueCode).toBe('active');
      expect(param(p, 'events-since-subscription-start')?.valueString).toBe('3');
    });

    test('type $status with id and status parameters; POST with Parameters too', async () => {
      const res = await request(f.app).get(`/fhir/Subscription/$status?id=${subId}&status=active`);
      expect(res.status).toBe(200);
      expect((res.body as Bundle).entry).toHaveLength(1);
      const none = await request(f.app).get(`/fhir/Subscription/$status?id=${subId}&status=off`);
      expect((none.body as Bundle).entry ?? []).toHaveLength(0);
      const post = await request(f.app)
        .post('/fhir/Subscription/$status')
        .set('Content-Type', 'application/fhir+json')
        .send(JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'id', valueId: subId }] }));
      expect(post.status).toBe(200);
      expect((post.body as Bundle).entry).toHaveLength(1);
    });

    test('$events with eventsSinceNumber and eventsUntilNumber: a history Bundle of the stored events', async () => {
      const res = await request(f.app).get(`/fhir/Subscription/${subId}/$events?eventsSinceNumber=2&eventsUntilNumber=3`);
      expect(res.status).toBe(200);
      const bundle = res.body as Bundle;
      expect(bundle.type).toBe('history');
      const p = statusOf(bundle);
      expect(param(p, 'type')?.valueCode).toBe('query-event');
      expect(notificationEvents(p)).toEqual([
        { number: '2', focus: `${BASE}/Appointment/${appointments[1]}` },
        { number: '3', focus: `${BASE}/Appointment/${appointments[2]}` },
      ]);
      expect(bundle.entry!.slice(1).map((e) => e.fullUrl)).toEqual([`${BASE}/Appointment/${appointments[1]}`, `${BASE}/Appointment/${appointments[2]}`]);
      const all = await request(f.app).get(`/fhir/Subscription/${subId}/$events`);
      expect(notificationEvents(statusOf(all.body as Bundle)).map((e) => e.number)).toEqual(['1', '2', '3']);
      const since = await request(f.app).get(`/fhir/Subscription/${subId}/$events?eventsSinceNumber=3`);
      expect(notificationEvents(statusOf(since.body as Bundle)).map((e) => e.number)).toEqual(['3']);
    });

    test('$events with a malformed number answers 400 invalid', async () => {
      const res = await request(f.app).get(`/fhir/Subscription/${subId}/$events?eventsSinceNumber=abc`);
      expect(res.status).toBe(400);
      expect(res.body.issue[0].code).toBe('invalid');
    });

    test('events past the retention are gone from $events; the counter stays', async () => {
      const { purgeEvents } = await import('../../src/subscriptions/event-store');
      const { rows } = await f.ctx.db.query<{ occurred_at: Date }>('SELECT max(occurred_at) AS occurred_at FROM subscription_event WHERE subscription_id = $1 AND event_number = 1', [subId]);
      expect(await purgeEvents(f.ctx.db, new Date(new Date(rows[0].occurred_at).getTime() + 1))).toBeGreaterThanOrEqual(1);
      const res = await request(f.app).get(`/fhir/Subscription/${subId}/$events`);
      const p = statusOf(res.body as Bundle);
      expect(notificationEvents(p).map((e) => e.number)).not.toContain('1');
      expect(param(p, 'events-since-subscription-start')?.valueString).toBe('3');
    });

    test('$events of an unknown Subscription answers 404 not-found', async () => {
      const res = await request(f.app).get('/fhir/Subscription/unknown-sub/$events');
      expect(res.status).toBe(404);
      expect(res.body.issue[0].code).toBe('not-found');
    });
  });

  test('heartbeat after heartbeatPeriod without a delivery (fake clock)', async () => {
    const sub = await activeSubscription(f, subscription(receiver.url('/heartbeat'), { heartbeat: 60, filter: 'Appointment?_id=none' }));
    await f.dispatcher.tick();
    expect(receiver.ofType('heartbeat', '/heartbeat')).toHaveLength(0);
    f.ctx.clock.advance(59_000);
    await f.dispatcher.tick();
    expect(receiver.ofType('heartbeat', '/heartbeat')).toHaveLength(0);
    f.ctx.clock.advance(2_000);
    await f.dispatcher.tick();
    const [hb] = await receiver.waitFor('heartbeat', 1, '/heartbeat');
    const p = statusOf(hb.bundle!);
    expect(param(p, 'status')?.valueCode).toBe('active');
    expect(param(p, 'events-since-subscription-start')?.valueString).toBe('0');
    expect(param(p, 'subscription')?.valueReference).toEqual({ reference: `${BASE}/Subscription/${sub.id}` });
    // The heartbeat restarts the period.
    f.ctx.clock.advance(30_000);
    await f.dispatcher.tick();
    expect(receiver.ofType('heartbeat', '/heartbeat')).toHaveLength(1);
    f.ctx.clock.advance(31_000);
    await f.dispatcher.tick();
    await receiver.waitFor('heartbeat', 2, '/heartbeat');
  });
});
