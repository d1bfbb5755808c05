import request from 'supertest';
import type { Bundle, CapabilityStatement, Subscription } from '@medplum/fhirtypes';
import { composeTerminus } from '../../src/app';
import { asFhir, FHIR_JSON, proposal, requestor, type BookingFixture } from '../booking/builders';
import { activeSubscription, CANCEL, Receiver, subscription, subscriptionFixture, UPDATE, type SubscriptionFixture } from './helpers';

const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';

function withChannel(sub: Subscription, channel: Record<string, unknown>): Subscription {
  return { ...sub, channel: { ...sub.channel, ...channel } } as Subscription;
}

describe('ISiKSubscriptionTermin rules (ISiK point 1, backport "components")', () => {
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

  const post = (sub: unknown) => request(f.app).post('/fhir/Subscription').set('Content-Type', FHIR_JSON).send(JSON.stringify(sub));

  test.each<[string, (url: string) => unknown, string, string]>([
    ['an unknown topic', (u) => ({ ...subscription(u), criteria: 'https://gematik.de/fhir/isik/SubscriptionTopic/patient-merge' }), 'not-supported', 'Subscription.criteria'],
    ['an R4 query as criteria', (u) => ({ ...subscription(u), criteria: 'Appointment?status=booked' }), 'not-supported', 'Subscription.criteria'],
    ['a websocket channel', (u) => withChannel(subscription(u), { type: 'websocket' }), 'not-supported', 'Subscription.channel.type'],
    ['a custom channel type', (u) => withChannel(subscription(u), { _type: { extension: [{ url: `${BP}/backport-channel-type`, valueCoding: { code: 'zulip' } }] } }), 'not-supported', 'Subscription.channel.type'],
    ['full-resource payload', (u) => subscription(u, { content: 'full-resource' }), 'not-supported', 'Subscription.channel.payload.extension'],
    ['empty payload', (u) => subscription(u, { content: 'empty' }), 'not-supported', 'Subscription.channel.payload.extension'],
    ['an unknown payload content', (u) => subscription(u, { content: 'partial' }), 'not-supported', 'Subscription.channel.payload.extension'],
    ['payload application/json', (u) => subscription(u, { payload: 'application/json' }), 'not-supported', 'Subscription.channel.payload'],
    ['no payload', (u) => withChannel(subscription(u), { payload: undefined, _payload: undefined }), 'not-supported', 'Subscription.channel.payload'],
    ['http to another host', () => subscription('http://portal.example.org/notify'), 'security', 'Subscription.channel.endpoint'],
    ['an ftp endpoint', () => subscription('ftp://127.0.0.1/notify'), 'security', 'Subscription.channel.endpoint'],
    ['credentials in the endpoint', () => subscription('https://user:pw@portal.example.org/notify'), 'security', 'Subscription.channel.endpoint'],
    ['no endpoint', (u) => withChannel(subscription(u), { endpoint: undefined }), 'security', 'Subscription.channel.endpoint'],
    ['a header without a colon', (u) => subscription(u, { header: ['Authorization Basic abc'] }), 'value', 'Subscription.channel.header'],
    ['a reserved header', (u) => subscription(u, { header: ['Host: evil.example.org'] }), 'value', 'Subscription.channel.header'],
    ['a masked header nobody stored', (u) => subscription(u, { header: ['Authorization: Basic ****abcde'] }), 'value', 'Subscription.channel.header'],
    ['a filter on another type', (u) => subscription(u, { filter: 'Patient?name=x' }), 'not-supported', 'Subscription.criteria.extension'],
    ['a filter without parameters', (u) => subscription(u, { filter: 'Appointment?' }), 'not-supported', 'Subscription.criteria.extension'],
  ])('%s is refused with 422 and a coded issue', async (_label, build, code, expression) => {
    const res = await post(build(receiver.url()));
    expect(res.status).toBe(422);
    expect(res.body.issue[0].code).toBe(code);
    expect(res.body.issue[0].expression).toEqual([expression]);
  });

  test('production accepts only https endpoints, also for loopback', async () => {
    const env = composeTerminus({ ...f.ctx, config: { ...f.ctx.config, production: true } }).fhir;
    const { handle } = await import('../../src/fhir/interactions');
    const { OperationOutcomeError } = await import('../../src/server-lib/outcomes');
    const err = await handle({ method: 'POST', path: ['Subscription'], query: [], headers: {}, body: subscription(receiver.url()) }, env).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationOutcomeError);
    expect((err as InstanceType<typeof OperationOutcomeError>).status).toBe(422);
    expect((err as InstanceType<typeof OperationOutcomeError>).issues[0].code).toBe('security');
    const ok = await handle({ method: 'POST', path: ['Subscription'], query: [], headers: {}, body: subscription('https://portal.example.org/notify') }, env);
    expect(ok.status).toBe(201);
  });

  test('the client may not set error; it may turn a subscription off', async () => {
    const sub = await activeSubscription(f, subscription(receiver.url('/off')));
    const bad = await request(f.app).put(`/fhir/Subscription/${sub.id}`).set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...sub, status: 'error' }));
    expect(bad.status).toBe(422);
    expect(bad.body.issue[0].code).toBe('value');
    expect(bad.body.issue[0].expression).toEqual(['Subscription.status']);
    const off = await request(f.app).put(`/fhir/Subscription/${sub.id}`).set('Content-Type', FHIR_JSON).send(JSON.stringify({ ...sub, status: 'off' }));
    expect(off.status).toBe(200);
    expect(off.body.status).toBe('off');
  });

  test('Subscription.end: the server turns it off once the end has passed', async () => {
    const end = new Date(f.ctx.now().getTime() + 3600_000).toISOString();
    const sub = await activeSubscription(f, { ...subscription(receiver.url('/ends')), end });
    f.ctx.clock.advance(3600_000 + 1000);
    await f.dispatcher.tick();
    const res = await request(f.app).get(`/fhir/Subscription/${sub.id}`);
    expect(res.body.status).toBe('off');
  });

  test('search by criteria, status and url', async () => {
    const sub = await activeSubscription(f, subscription(receiver.url('/searchable'), { topic: CANCEL }));
    const byUrl = await request(f.app).get(`/fhir/Subscription?url=${encodeURIComponent(receiver.url('/searchable'))}`);
    expect(byUrl.status).toBe(200);
    expect((byUrl.body as Bundle).entry!.map((e) => e.resource!.id)).toEqual([sub.id]);
    const byCriteria = await request(f.app).get(`/fhir/Subscription?criteria=${encodeURIComponent(CANCEL)}&status=active`);
    expect((byCriteria.body as Bundle).entry!.map((e) => e.resource!.id)).toContain(sub.id);
    const none = await request(f.app).get(`/fhir/Subscription?criteria=${encodeURIComponent(UPDATE)}&url=${encodeURIComponent(receiver.url('/searchable'))}`);
    expect((none.body as Bundle).entry ?? []).toHaveLength(0);
  });

  test('topic discovery: CapabilityStatement names the topics, the backport server, $status and $events', async () => {
    const res = await request(f.app).get('/fhir/metadata');
    const cs = res.body as CapabilityStatement;
    expect(cs.instantiates).toEqual(
      expect.arrayContaining([
        'http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4',
        'https://gematik.de/fhir/isik/CapabilityStatement/ISiKCapabilityStatementTerminSubscriptionRolle',
      ]),
    );
    const sub = cs.rest![0].resource!.find((r) => r.type === 'Subscription')!;
    expect(sub.extension).toEqual([
      { url: 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical', valueCanonical: CANCEL },
      { url: 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/capabilitystatement-subscriptiontopic-canonical', valueCanonical: UPDATE },
    ]);
    expect(sub.supportedProfile).toEqual(expect.arrayContaining(['https://gematik.de/fhir/isik/StructureDefinition/ISiKSubscriptionTermin']));
    expect(sub.operation).toEqual(
      expect.arrayContaining([
        { name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status' },
        { name: 'events', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events' },
      ]),
    );
    expect(cs.rest![0].resource!.find((r) => r.type === 'Parameters')?.supportedProfile).toEqual(['https://gematik.de/fhir/isik/StructureDefinition/BackportSubscriptionStatusR4Fixed']);
  });
});

describe('Subscriptions belong to the institution that created them', () => {
  let f: SubscriptionFixture;
  let receiver: Receiver;
  let aSub: Subscription;
  const A = requestor('1-INST-A');
  const B = requestor('1-INST-B');
  beforeAll(async () => {
    f = await subscriptionFixture();
    receiver = await new Receiver().start();
    const res = await asFhir(f, { method: 'POST', path: ['Subscription'], body: subscription(receiver.url('/inst-a')) }, { ...A, scopes: ['system/Subscription.cruds'] });
    expect(res.status).toBe(201);
    aSub = res.body as Subscription;
    await receiver.waitFor('handshake', 1, '/inst-a');
  });
  afterAll(async () => {
    await receiver.stop();
    await f.close();
  });

  test.each<[string, (f: BookingFixture) => Promise<{ status: number }>]>([
    ['read', (fx) => asFhir(fx, { method: 'GET', path: ['Subscription', aSub.id!] }, B)],
    ['update', (fx) => asFhir(fx, { method: 'PUT', path: ['Subscription', aSub.id!], body: { ...aSub, status: 'off' } }, B)],
    ['delete', (fx) => asFhir(fx, { method: 'DELETE', path: ['Subscription', aSub.id!] }, B)],
    ['$status', (fx) => asFhir(fx, { method: 'GET', path: ['Subscription', aSub.id!, '$status'] }, B)],
    ['$events', (fx) => asFhir(fx, { method: 'GET', path: ['Subscription', aSub.id!, '$events'] }, B)],
  ])('%s by institution B answers 404', async (_label, call) => {
    const res = await call(f);
    expect(res.status).toBe(404);
  });

  test('search and type-level $status by B do not show it; A sees it', async () => {
    const search = await asFhir(f, { method: 'GET', path: ['Subscription'] }, B);
    expect(((search.body as Bundle).entry ?? []).map((e) => e.resource!.id)).not.toContain(aSub.id);
    const status = await asFhir(f, { method: 'GET', path: ['Subscription', '$status'] }, B);
    expect(status.status).toBe(200);
    expect((status.body as Bundle).entry ?? []).toHaveLength(0);
    const mine = await asFhir(f, { method: 'GET', path: ['Subscription', '$status'] }, A);
    expect((mine.body as Bundle).entry).toHaveLength(1);
  });

  test("A's subscription does not hear about B's appointments; B's own does", async () => {
    const bRes = await asFhir(f, { method: 'POST', path: ['Subscription'], body: subscription(receiver.url('/inst-b')) }, B);
    expect(bRes.status).toBe(201);
    await receiver.waitFor('handshake', 1, '/inst-b');
    const booked = await asFhir(f, { method: 'POST', path: ['Appointment', '$book'], body: proposal({ start: '2027-01-01T11:05:00Z', end: '2027-01-01T11:55:00Z' }) }, B);
    expect([201, 202]).toContain(booked.status);
    const id = (booked.body as { id: string }).id;
    const changed = await asFhir(
      f,
      {
        method: 'PATCH',
        path: ['Appointment', id],
        body: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.comment' }, { name: 'value', valueString: 'geändert' }] }] },
      },
      B,
    );
    expect(changed.status).toBe(200);
    await receiver.waitFor('event-notification', 1, '/inst-b');
    await f.dispatcher.tick();
    expect(receiver.ofType('event-notification', '/inst-a')).toHaveLength(0);
  });
});
