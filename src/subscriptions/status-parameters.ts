import type { Parameters, ParametersParameter } from '@medplum/fhirtypes';
import { ISIK, SUBSCRIPTION_ERROR, type NotificationType, type SubscriptionStatusCode } from './backport';
import type { SubscriptionEvent } from './event-store';
import { LAST_DELIVERY_URL } from '../common/vocabulary';

export interface StatusInput {
  baseUrl: string;
  subscriptionId: string;
  topic: string;
  status: SubscriptionStatusCode;
  type: NotificationType;
  eventsSinceStart: number;
  events?: SubscriptionEvent[];
  /** A `subscription-error` code while the subscription is in error. */
  errorCode?: string | null;
  /** When a notification last reached the endpoint (query-status only). */
  lastDeliveryAt?: Date | null;
}

/**
 * The SubscriptionStatus of the R4 backport as ISiK rebuilt it (ISiKSubscriptionStatus ←
 * BackportSubscriptionStatusR4Fixed): `events-since-subscription-start` counts events only, one
 * `notification-event` per event with its number, time and focus (id-only: a reference, never
 * the resource).
 */
export function statusParameters(input: StatusInput): Parameters {
  const parameter: ParametersParameter[] = [
    { name: 'subscription', valueReference: { reference: `${input.baseUrl}/Subscription/${input.subscriptionId}` } },
    { name: 'topic', valueCanonical: input.topic },
    { name: 'status', valueCode: input.status, ...(input.lastDeliveryAt ? { extension: [{ url: LAST_DELIVERY_URL, valueInstant: input.lastDeliveryAt.toISOString() }] } : {}) },
    { name: 'type', valueCode: input.type },
    { name: 'events-since-subscription-start', valueString: String(input.eventsSinceStart) },
  ];
  for (const e of input.events ?? []) {
    parameter.push({
      name: 'notification-event',
      part: [
        { name: 'event-number', valueString: String(e.eventNumber) },
        { name: 'timestamp', valueInstant: e.occurredAt.toISOString() },
        { name: 'focus', valueReference: { reference: `${input.baseUrl}/${e.focusType}/${e.focusId}` } },
      ],
    });
  }
  if (input.status === 'error' && input.errorCode) {
    parameter.push({ name: 'error', valueCodeableConcept: { coding: [{ system: SUBSCRIPTION_ERROR, code: input.errorCode }] } });
  }
  return { resourceType: 'Parameters', meta: { profile: [ISIK.statusProfile] }, parameter };
}
