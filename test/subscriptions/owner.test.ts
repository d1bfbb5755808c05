import { proposal } from '../booking/builders';
import type { TestToken } from '../guard/helpers/get-token';
import { call, institution, type PepHarness } from '../guard/pep/helpers';
import { guardedSubscriptions, notificationEvents, type Receiver, sleep, statusOf, subscription } from './helpers';

const OWNER = '1-OWN-PRACTICE';

/**
 * Ownership (docs/requirements.md#identity-scopes-and-ownership) of what a repository owner
 * creates: its Subscriptions and Appointments belong to it (not to "everybody"), so another
 * institution can neither see nor take them over; an owner's Subscription still hears every
 * institution's appointments.
 */
describe('resources created by a repository owner', () => {
  let h: PepHarness;
  let a: TestToken;
  let b: TestToken;
  let owner: TestToken;
  let receiver: Receiver;
  let ownerSub: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ h, receiver, close } = await guardedSubscriptions(OWNER, 'owner-manual', [
      ['owner-slot-1', '2027-09-06T10:00:00Z', '2027-09-06T10:30:00Z'],
      ['owner-slot-2', '2027-09-06T11:00:00Z', '2027-09-06T11:30:00Z'],
    ]));
    a = await institution(h, { telematikId: '1-OWN-INST-A' });
    b = await institution(h, { telematikId: '1-OWN-INST-B' });
    owner = await institution(h, { telematikId: OWNER });
    const created = await call(h, owner, 'POST', '/Subscription', { body: subscription(receiver.url('/owner'), { header: ['Authorization: Basic T1dORVItU0VDUkVULTEyMzQ1'] }) });
    expect(created.status).toBe(201);
    ownerSub = created.body.id;
    await receiver.waitFor('handshake', 1, '/owner');
  });
  afterAll(() => close());

  const ownerOf = async (type: string, id: string) =>
    (await h.ctx.db.query<{ owner: string | null }>('SELECT owner FROM resource WHERE resource_type = $1 AND id = $2', [type, id])).rows[0]?.owner;

  test('the owner\'s Subscription is recorded as the owner\'s and is invisible to B', async () => {
    expect(await ownerOf('Subscription', ownerSub)).toBe(OWNER);
    expect((await call(h, owner, 'GET', `/Subscription/${ownerSub}`)).status).toBe(200);
    for (const path of [`/Subscription/${ownerSub}`, `/Subscription/${ownerSub}/$status`, `/Subscription/${ownerSub}/$events`]) {
      expect([path, (await call(h, b, 'GET', path)).status]).toEqual([path, 404]);
    }
    const found = await call(h, b, 'GET', `/Subscription?_id=${ownerSub}`);
    expect(found.body.total).toBe(0);
  });

  test('B can neither redirect nor delete it: 404, and the stored endpoint stays', async () => {
    const current = (await call(h, owner, 'GET', `/Subscription/${ownerSub}`)).body;
    const stolen = await call(h, b, 'PUT', `/Subscription/${ownerSub}`, { body: { ...current, channel: { ...current.channel, endpoint: receiver.url('/stolen') } } });
    expect([stolen.status, stolen.body.issue?.[0]?.code]).toEqual([404, 'not-found']);
    // A write that a rule would refuse answers the same 404: nothing tells B the id exists.
    const refused = await call(h, b, 'PUT', `/Subscription/${ownerSub}`, { body: { ...current, status: 'error' } });
    expect(refused.status).toBe(404);
    expect((await call(h, b, 'DELETE', `/Subscription/${ownerSub}`)).status).toBe(404);
    const after = await call(h, owner, 'GET', `/Subscription/${ownerSub}`);
    expect(after.body.channel.endpoint).toBe(receiver.url('/owner'));
    expect(receiver.ofType('handshake', '/stolen')).toHaveLength(0);
  });

  test('an appointment the owner books belongs to the owner: A and B get 404, the owner reads it', async () => {
    const booked = await call(h, owner, 'POST', '/Appointment/$book', {
      body: proposal({ start: '2027-09-06T11:00:00Z', end: '2027-09-06T11:30:00Z', slot: [{ reference: 'Slot/owner-slot-2' }] }),
    });
    expect(booked.status).toBe(202);
    const id = booked.body.id as string;
    expect(await ownerOf('Appointment', id)).toBe(OWNER);
    expect((await call(h, owner, 'GET', `/Appointment/${id}`)).status).toBe(200);
    for (const who of [a, b]) {
      expect((await call(h, who, 'GET', `/Appointment/${id}`)).status).toBe(404);
      expect((await call(h, who, 'GET', `/Appointment?_id=${id}`)).body.total).toBe(0);
    }
    const cancel = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'cancelled' }] }] };
    expect((await call(h, b, 'PATCH', `/Appointment/${id}`, { body: cancel })).status).toBe(404);
  });

  test('B changing an immutable of A\'s appointment by PUT gets 404, not the immutable rule', async () => {
    const booked = await call(h, a, 'POST', '/Appointment/$book', {
      body: proposal({ start: '2027-09-06T10:00:00Z', end: '2027-09-06T10:30:00Z', slot: [{ reference: 'Slot/owner-slot-1' }] }),
    });
    expect(booked.status).toBe(202);
    const id = booked.body.id as string;
    const moved = await call(h, b, 'PUT', `/Appointment/${id}`, { body: { ...booked.body, start: '2027-09-06T10:05:00Z' } });
    expect([moved.status, moved.body.issue?.[0]?.code]).toEqual([404, 'not-found']);
    // Requestors may not delete appointments at all (no `d` in their Appointment scope): the scope check comes first.
    expect((await call(h, b, 'DELETE', `/Appointment/${id}`)).status).toBe(403);

    // The owner's subscription hears A's appointment being confirmed.
    const confirm = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'booked' }] }] };
    expect((await call(h, owner, 'PATCH', `/Appointment/${id}`, { body: confirm })).status).toBe(200);
    const notes = await receiver.waitFor('event-notification', 1, '/owner');
    expect(notes.flatMap((n) => notificationEvents(statusOf(n.bundle!)).map((e) => e.focus))).toContain(`https://terminus.example/fhir/Appointment/${id}`);
    await sleep(100);
    expect(receiver.ofType('event-notification', '/stolen')).toHaveLength(0);
  });
});
