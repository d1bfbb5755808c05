import type { Appointment, Bundle, Slot } from '@medplum/fhirtypes';
import { GuardClient } from '../../../src/client';
import { proposal } from '../../booking/builders';
import { testCard } from '../helpers/get-token';
import { supertestTransport } from '../helpers/transport';
import { decodePayload, nowSec, pepHarness, type PepHarness } from './helpers';

/**
 * The story a practice system lives through, with the reference client library only:
 * discovery, registration, token exchange, slot search, `$book`, read back, refresh, book again.
 */
describe('end to end through the guard', () => {
  let h: PepHarness;
  beforeAll(async () => {
    h = await pepHarness({ fixture: true });
  });
  afterAll(() => h.close());

  test('register, token exchange, search slots, $book, read back, refresh, book again', async () => {
    const client = new GuardClient({ server: h.ctx.config.publicUrl, transport: supertestTransport(h.app), retries: 0, now: () => nowSec(h) });
    const fhir = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
      const res = await client.request(method, `${h.base}${path}`, {
        headers: { accept: 'application/fhir+json', ...(body ? { 'content-type': 'application/fhir+json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: res.json as T };
    };

    // Registration and token exchange (card of the institution, software attestation).
    const first = await client.login(testCard(h.ctx, { telematikId: '1-PEP-E2E', professionOid: '1.2.276.0.76.4.50' }));
    expect(client.clientId).toBeTruthy();
    expect(decodePayload(first.accessToken).sub).toBe('1-PEP-E2E');

    // Free slots of the calendar.
    const search = await fhir<Bundle<Slot>>('GET', '/Slot?schedule=Schedule-Read-Example&status=free');
    expect(search.status).toBe(200);
    const free = (search.body.entry ?? []).map((e) => e.resource!).filter((s) => s.status === 'free');
    expect(free.length).toBeGreaterThanOrEqual(2);

    // $book the first.
    const slotA = free[0];
    const booked = await fhir<Appointment>('POST', '/Appointment/$book', proposal({ slot: [{ reference: `Slot/${slotA.id}` }], start: slotA.start, end: slotA.end }));
    expect(booked.status).toBe(201);
    expect(booked.body.status).toBe('booked');

    // Read it back.
    const read = await fhir<Appointment>('GET', `/Appointment/${booked.body.id}`);
    expect(read.status).toBe(200);
    expect(read.body.slot).toEqual([{ reference: `Slot/${slotA.id}` }]);

    // Refresh: a new access token, same DPoP key, rotated refresh token.
    const refreshed = await client.refresh();
    expect(refreshed.accessToken).not.toBe(first.accessToken);
    expect(refreshed.refreshToken).not.toBe(first.refreshToken);
    expect(decodePayload(refreshed.accessToken).cnf).toEqual(decodePayload(first.accessToken).cnf);

    // Book again with the new token: the next free slot.
    const again = await fhir<Bundle<Slot>>('GET', '/Slot?schedule=Schedule-Read-Example&status=free');
    const slotB = (again.body.entry ?? []).map((e) => e.resource!).find((s) => s.id !== slotA.id && s.status === 'free')!;
    const second = await fhir<Appointment>('POST', '/Appointment/$book', proposal({ slot: [{ reference: `Slot/${slotB.id}` }], start: slotB.start, end: slotB.end }));
    expect(second.status).toBe(201);
    expect(second.body.status).toBe('booked');

    // Both are the institution's: found by its own search.
    const mine = await fhir<Bundle<Appointment>>('GET', '/Appointment?status=booked');
    expect((mine.body.entry ?? []).map((e) => e.resource!.id).sort()).toEqual([booked.body.id, second.body.id].sort());
  });
});
