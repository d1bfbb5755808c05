import crypto from 'node:crypto';
import type { Bundle, BundleEntry } from '@medplum/fhirtypes';
import { ISIK } from './backport';
import type { SubscriptionEvent } from './event-store';
import { statusParameters, type StatusInput } from './status-parameters';

/**
 * A notification Bundle (backport "notifications", ISiKSubscriptionNotification): `history`, the
 * status Parameters first with a `request` mirroring `$status`, then one entry per event focus
 * with `fullUrl` and `request` but no resource (id-only). Nothing in it names a patient.
 */
export function notificationBundle(input: StatusInput, now: Date): Bundle {
  const status: BundleEntry = {
    fullUrl: `urn:uuid:${crypto.randomUUID()}`,
    resource: statusParameters(input),
    request: { method: 'GET', url: `${input.baseUrl}/Subscription/${input.subscriptionId}/$status` },
    response: { status: '200' },
  };
  return {
    resourceType: 'Bundle',
    id: crypto.randomUUID(),
    meta: { profile: [ISIK.notificationProfile] },
    type: 'history',
    timestamp: now.toISOString(),
    entry: [status, ...focusEntries(input.baseUrl, input.events ?? [])],
  };
}

function focusEntries(baseUrl: string, events: SubscriptionEvent[]): BundleEntry[] {
  const seen = new Set<string>();
  const entries: BundleEntry[] = [];
  for (const e of events) {
    const local = `${e.focusType}/${e.focusId}`;
    if (seen.has(local)) continue;
    seen.add(local);
    entries.push({
      fullUrl: `${baseUrl}/${local}`,
      request: e.deleted ? { method: 'DELETE', url: local } : { method: 'PUT', url: local },
      response: { status: e.deleted ? '204' : '200', etag: `W/"${e.focusVersion}"` },
    });
  }
  return entries;
}
