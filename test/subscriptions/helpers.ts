import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Bundle, Parameters, Subscription } from '@medplum/fhirtypes';
import request from 'supertest';
import type { Dispatcher, DispatcherSettings } from '../../src/subscriptions';
import { importResources } from '../../src/fhir';
import { pepHarness, type PepHarness } from '../guard/pep/helpers';
import { bookingFixture, FHIR_JSON, freeSlot, MANUAL, patient, proposal, put, schedule, type BookingFixture } from '../booking/builders';

export const UPDATE = 'https://gematik.de/fhir/isik/SubscriptionTopic/appointment-update';
export const CANCEL = 'https://gematik.de/fhir/isik/SubscriptionTopic/appointment-cancel';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';

/** What a receiver got: one POST. */
export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  text: string;
  bundle?: Bundle;
}

/**
 * A real HTTP receiver on loopback: records every POST and answers `status` (200 by default);
 * `stop()`/`start()` take it off the network and back on the same port.
 */
export class Receiver {
  readonly received: Received[] = [];
  status = 200;
  /** Decides the answer per request instead of `status` (a receiver that checks credentials). */
  answer?: (got: Received) => number;
  /** No answer at all while set: a receiver that hangs (the sender waits until it gives up or dies). */
  hold = false;
  /** Delay before answering (timeout tests). */
  delayMs = 0;
  private server?: http.Server;
  port = 0;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let bundle: Bundle | undefined;
        try {
          bundle = JSON.parse(text) as Bundle;
        } catch {
          bundle = undefined;
        }
        const got = { path: req.url ?? '', headers: req.headers, text, bundle };
        this.received.push(got);
        if (this.hold) return;
        setTimeout(() => {
          res.statusCode = this.answer ? this.answer(got) : this.status;
          res.end();
        }, this.delayMs);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path = '/notify'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** Notifications of a type (handshake, heartbeat, event-notification) received so far. */
  ofType(type: string, path?: string): Received[] {
    return this.received.filter((r) => (!path || r.path === path) && r.bundle && notificationType(r.bundle) === type);
  }

  async waitFor(type: string, count = 1, path?: string, timeoutMs = 10_000): Promise<Received[]> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const got = this.ofType(type, path);
      if (got.length >= count) return got;
      await sleep(20);
    }
    throw new Error(`receiver got ${this.ofType(type, path).length} ${type} notification(s), expected ${count}`);
  }
}

export function statusOf(bundle: Bundle): Parameters {
  return bundle.entry![0].resource as Parameters;
}

export function param(p: Parameters, name: string): Record<string, unknown> | undefined {
  return p.parameter?.find((x) => x.name === name) as Record<string, unknown> | undefined;
}

export function notificationType(bundle: Bundle): string | undefined {
  const p = bundle.entry?.[0]?.resource as Parameters | undefined;
  return p?.parameter?.find((x) => x.name === 'type')?.valueCode;
}

/** The `notification-event` parts of a status: [event number, focus reference]. */
export function notificationEvents(p: Parameters): { number: string; focus: string }[] {
  return (p.parameter ?? [])
    .filter((x) => x.name === 'notification-event')
    .map((x) => ({
      number: x.part!.find((y) => y.name === 'event-number')!.valueString!,
      focus: x.part!.find((y) => y.name === 'focus')!.valueReference!.reference!,
    }));
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A Subscription builder (ISiKSubscriptionTermin), with overrides. */
export function subscription(endpoint: string, opts: { topic?: string; filter?: string; payload?: string; content?: string; header?: string[]; heartbeat?: number; maxCount?: number; timeout?: number } = {}): Subscription {
  const channelExt = [];
  if (opts.heartbeat !== undefined) channelExt.push({ url: `${BP}/backport-heartbeat-period`, valueUnsignedInt: opts.heartbeat });
  if (opts.timeout !== undefined) channelExt.push({ url: `${BP}/backport-timeout`, valueUnsignedInt: opts.timeout });
  if (opts.maxCount !== undefined) channelExt.push({ url: `${BP}/backport-max-count`, valuePositiveInt: opts.maxCount });
  const sub = {
    resourceType: 'Subscription',
    meta: { profile: ['https://gematik.de/fhir/isik/StructureDefinition/ISiKSubscriptionTermin'] },
    status: 'requested',
    reason: 'Terminänderungen für das Portal',
    criteria: opts.topic ?? UPDATE,
    ...(opts.filter ? { _criteria: { extension: [{ url: `${BP}/backport-filter-criteria`, valueString: opts.filter }] } } : {}),
    channel: {
      type: 'rest-hook',
      endpoint,
      ...(channelExt.length ? { extension: channelExt } : {}),
      payload: opts.payload ?? 'application/fhir+json',
      _payload: { extension: [{ url: `${BP}/backport-payload-content`, valueCode: opts.content ?? 'id-only' }] },
      ...(opts.header ? { header: opts.header } : {}),
    },
  };
  return sub as unknown as Subscription;
}

/** FHIRPath Patch confirming a pending appointment (status booked): the event the topics report. */
export const CONFIRM = {
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Appointment.status' }, { name: 'value', valueCode: 'booked' }] }],
};

/** Settings that make retries and polls fast enough for tests. */
export const FAST = { pollMs: 50, backoffMs: 50, maxAttempts: 8, timeoutMs: 1500, maxTimeoutMs: 3000 };

export interface SubscriptionFixture extends BookingFixture {
  dispatcher: Dispatcher;
}

/** The booking fixture (ISiK Stufe 5 data) with a manual-confirmation schedule and the delivery loop running. */
export async function subscriptionFixture(opts: { pglite?: boolean; env?: Record<string, string>; dispatcher?: boolean; settings?: Partial<DispatcherSettings> } = {}): Promise<SubscriptionFixture> {
  const f = await bookingFixture(opts);
  await put(f, schedule('manual-schedule', { extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'manuell' }, MANUAL] }), patient('patient-b'));
  // f.close stops the delivery loop with the rest of the application.
  return { ...f, dispatcher: f.terminus.subscriptions.start({ ...FAST, ...opts.settings }) };
}

/**
 * The enforcement point in front of the ISiK Stufe 5 data, with `REPOSITORY_OWNERS = owner`, a
 * manual-confirmation Schedule `scheduleId` with the given free slots ([id, start, end]), the
 * delivery loop running and one receiver.
 */
export async function guardedSubscriptions(owner: string, scheduleId: string, slots: [string, string, string][]): Promise<{ h: PepHarness; receiver: Receiver; close(): Promise<void> }> {
  const h = await pepHarness({ env: { REPOSITORY_OWNERS: owner }, fixture: true });
  await importResources(h.fhir, {
    resourceType: 'Bundle',
    type: 'collection',
    entry: [
      { resource: schedule(scheduleId, { extension: [{ url: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Schedule.name', valueString: 'manuell' }, MANUAL] }) },
      ...slots.map(([id, start, end]) => ({ resource: freeSlot(id, start, end, scheduleId) })),
    ],
  } as Bundle);
  h.terminus.subscriptions.start(FAST);
  const receiver = await new Receiver().start();
  return {
    h,
    receiver,
    close: async () => {
      await receiver.stop();
      await h.close();
    },
  };
}

let day = 0;
/** Books a fresh slot on its own day (202 pending on the manual schedule). */
export async function book(f: BookingFixture, scheduleId = 'manual-schedule', patientRef = 'Patient/Patient-Read-Example'): Promise<{ status: number; body: { id: string; status: string } }> {
  day += 1;
  const date = new Date(Date.UTC(2027, 5, 1) + day * 86_400_000).toISOString().slice(0, 10);
  const slot = { id: `sub-slot-${scheduleId}-${day}-${Math.random().toString(36).slice(2, 8)}`, start: `${date}T10:00:00Z`, end: `${date}T10:30:00Z` };
  await put(f, freeSlot(slot.id, slot.start, slot.end, scheduleId));
  const res = await request(f.app)
    .post('/fhir/Appointment/$book')
    .set('Content-Type', FHIR_JSON)
    .send(
      JSON.stringify(
        proposal({
          start: slot.start,
          end: slot.end,
          slot: [{ reference: `Slot/${slot.id}` }],
          participant: [{ actor: { reference: patientRef, display: 'Test Patient' }, status: 'accepted' }],
        }),
      ),
    );
  return { status: res.status, body: res.body };
}

/** Creates the Subscription over HTTP and waits for its handshake to turn it active. */
export async function activeSubscription(f: BookingFixture, sub: Subscription, timeoutMs = 8000): Promise<Subscription> {
  const res = await request(f.app).post('/fhir/Subscription').set('Content-Type', FHIR_JSON).send(JSON.stringify(sub));
  if (res.status !== 201) throw new Error(`Subscription create answered ${res.status}: ${JSON.stringify(res.body)}`);
  return subscriptionStatusAfter(f, res.body.id as string, 'active', timeoutMs);
}

/** Reads the Subscription until it shows `wanted` (or the time is up). */
export async function subscriptionStatusAfter(f: BookingFixture, id: string, wanted: string, timeoutMs = 8000): Promise<Subscription> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await request(f.app).get(`/fhir/Subscription/${id}`);
    if (res.body.status === wanted || Date.now() > until) return res.body as Subscription;
    await sleep(25);
  }
}

let patients = 0;
/** A patient of its own, so a test's filter criteria see only its own appointments. */
export async function freshPatient(f: BookingFixture): Promise<string> {
  patients += 1;
  const id = `sub-patient-${patients}-${Math.random().toString(36).slice(2, 8)}`;
  await put(f, patient(id));
  return `Patient/${id}`;
}
