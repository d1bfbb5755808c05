import type { Bundle, Parameters } from '@medplum/fhirtypes';
import { proposal } from '../booking/builders';
import type { TestToken } from '../guard/helpers/get-token';
import { call, institution, type PepHarness } from '../guard/pep/helpers';
import { guardedSubscriptions, notificationEvents, param, type Receiver, sleep, statusOf, subscription } from './helpers';

const OWNER = '1-SUB-PRACTICE';

/**
 * The subscription workflow end to end through the enforcement point: DPoP-bound tokens of two
 * institutions and of the practice running the repository
 * (docs/requirements.md#identity-scopes-and-ownership).
 */
describe('subscriptions behind the enforcement point', () => {
  let h: PepHarness;
  let a: TestToken;
  let b: TestToken;
  let owner: TestToken;
  let receiver: Receiver;
  let aSub: string;
  let bSub: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ h, receiver, close } = await guardedSubscriptions(OWNER, 'guarded-manual', [['guarded-slot', '2027-08-02T10:00:00Z', '2027-08-02T10:30:00Z']]));
    a = await institution(h, { telematikId: '1-SUB-INST-A' });
    b = await institution(h, { telematikId: '1-SUB-INST-B' });
    owner = await institution(h, { telematikId: OWNER });
    const created = await call(h, a, 'POST', '/Subscription', { body: subscription(receiver.url('/guarded-a'), { header: ['Authorization: Basic YTpzZWhyLWdlaGVpbS0xMjM0NQ=='] }) });
    expect(created.status).toBe(201);
    aSub = created.body.id;
    const createdB = await call(h, b, 'POST', '/Subscription', { body: subscription(receiver.url('/guarded-b')) });
    expect(createdB.status).toBe(201);
    bSub = createdB.body.id;
    await receiver.waitFor('handshake', 1, '/guarded-a');
    await receiver.waitFor('handshake', 1, '/guarded-b');
  });
  afterAll(() => close());

  test('A reads its Subscription with the header masked; B gets 404 for read, $status and $events', async () => {
    const mine = await call(h, a, 'GET', `/Subscription/${aSub}`);
    expect(mine.status).toBe(200);
    expect(mine.body.channel.header).toEqual(['Authorization: Basic ****0NQ==']);
    for (const path of [`/Subscription/${aSub}`, `/Subscription/${aSub}/$status`, `/Subscription/${aSub}/$events`]) {
      const res = await call(h, b, 'GET', path);
      expect([path, res.status]).toEqual([path, 404]);
      expect(res.body.issue[0].code).toBe('not-found');
    }
    const status = await call(h, b, 'GET', '/Subscription/$status');
    expect(status.status).toBe(200);
    expect(((status.body as Bundle).entry ?? []).map((e) => param(e.resource as Parameters, 'subscription')?.valueReference)).toEqual([
      { reference: `https://terminus.example/fhir/Subscription/${bSub}` },
    ]);
  });

  test('A books on the manual schedule (202 pending), the owner confirms: A hears it once, B not at all', async () => {
    const booked = await call(h, a, 'POST', '/Appointment/$book', {
      body: proposal({ start: '2027-08-02T10:00:00Z', end: '2027-08-02T10:30:00Z', slot: [{ reference: 'Slot/guarded-slot' }] }),
    });
    expect(booked.status).toBe(202);
    expect(booked.body.status).toBe('pending');
    const confirm = {
      resourceType: 'Parameters',
      parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'booked' }] }],
    };
    const confirmed = await call(h, owner, 'PATCH', `/Appointment/${booked.body.id}`, { body: confirm });
    expect(confirmed.status).toBe(200);
    const [n] = await receiver.waitFor('event-notification', 1, '/guarded-a');
    expect(n.headers.authorization).toBe('Basic YTpzZWhyLWdlaGVpbS0xMjM0NQ==');
    expect(notificationEvents(statusOf(n.bundle!))).toEqual([{ number: '1', focus: `https://terminus.example/fhir/Appointment/${booked.body.id}` }]);
    await sleep(300);
    expect(receiver.ofType('event-notification', '/guarded-a')).toHaveLength(1);
    expect(receiver.ofType('event-notification', '/guarded-b')).toHaveLength(0);
    const events = await call(h, a, 'GET', `/Subscription/${aSub}/$events?eventsSinceNumber=1&eventsUntilNumber=1`);
    expect(events.status).toBe(200);
    expect(notificationEvents(statusOf(events.body as Bundle))).toEqual([{ number: '1', focus: `https://terminus.example/fhir/Appointment/${booked.body.id}` }]);
  });
});
