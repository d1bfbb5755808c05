import { ISIK_PROFILE } from '../common/vocabulary';

/** Canonicals of the Subscriptions R5 Backport IG 1.1.0 and of ISiK 6 (ISiK Terminplanung 6.0.0). */
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport';
const ISIK_SD = 'https://gematik.de/fhir/isik/StructureDefinition';

export const EXT = {
  filterCriteria: `${BP}/StructureDefinition/backport-filter-criteria`,
  payloadContent: `${BP}/StructureDefinition/backport-payload-content`,
  heartbeatPeriod: `${BP}/StructureDefinition/backport-heartbeat-period`,
  timeout: `${BP}/StructureDefinition/backport-timeout`,
  maxCount: `${BP}/StructureDefinition/backport-max-count`,
  channelType: `${BP}/StructureDefinition/backport-channel-type`,
  topicCanonical: `${BP}/StructureDefinition/capabilitystatement-subscriptiontopic-canonical`,
} as const;

export const BACKPORT = {
  serverCapabilities: `${BP}/CapabilityStatement/backport-subscription-server-r4`,
  subscriptionProfile: `${BP}/StructureDefinition/backport-subscription`,
  statusOperation: `${BP}/OperationDefinition/backport-subscription-status`,
  eventsOperation: `${BP}/OperationDefinition/backport-subscription-events`,
} as const;

export const ISIK = {
  subscriptionProfile: ISIK_PROFILE.Subscription,
  statusProfile: `${ISIK_SD}/ISiKSubscriptionStatus`,
  notificationProfile: `${ISIK_SD}/ISiKSubscriptionNotification`,
  statusFixedProfile: `${ISIK_SD}/BackportSubscriptionStatusR4Fixed`,
  notificationFixedProfile: `${ISIK_SD}/BackportSubscriptionNotificationR4Fixed`,
  subscriptionRole: 'https://gematik.de/fhir/isik/CapabilityStatement/ISiKCapabilityStatementTerminSubscriptionRolle',
} as const;

/** `http://terminology.hl7.org/CodeSystem/subscription-error` (backport errors page). */
export const SUBSCRIPTION_ERROR = 'http://terminology.hl7.org/CodeSystem/subscription-error';

export type SubscriptionStatusCode = 'requested' | 'active' | 'error' | 'off';
export type NotificationType = 'handshake' | 'heartbeat' | 'event-notification' | 'query-status' | 'query-event';
/** Backport `subscription-error` codes a rest-hook attempt can end with. */
export type DeliveryErrorCode = 'no-response' | 'error-response' | 'dns-resolution-error';

/** The payload MIME types ISiKSubscription allows (`FhirMimeTypeVS`). */
export const PAYLOAD_TYPES = ['application/fhir+json', 'application/fhir+xml'] as const;
