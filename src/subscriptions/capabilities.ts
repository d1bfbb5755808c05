import type { CapabilityStatement } from '@medplum/fhirtypes';
import { BACKPORT, EXT, ISIK } from './backport';
import { topics } from './topics';

/**
 * Topic discovery (ISiK point 1, backport "conformance"): the topic canonicals as
 * `capabilitystatement-subscriptiontopic-canonical` on rest.resource(Subscription), the backport
 * server and ISiK Termin-Subscription role in `instantiates`, the profiles in `supportedProfile`,
 * and Parameters / Bundle with the ISiK status and notification profiles.
 */
export function addSubscriptionCapabilities(cs: CapabilityStatement): void {
  cs.instantiates = [...new Set([...(cs.instantiates ?? []), BACKPORT.serverCapabilities, ISIK.subscriptionRole])];
  const rest = cs.rest?.[0];
  if (!rest) return;
  const sub = rest.resource?.find((r) => r.type === 'Subscription');
  if (sub) {
    sub.extension = [...(sub.extension ?? []).filter((e) => e.url !== EXT.topicCanonical), ...topics().map((t) => ({ url: EXT.topicCanonical, valueCanonical: t.url }))];
    sub.supportedProfile = [...new Set([...(sub.supportedProfile ?? []), ISIK.subscriptionProfile, BACKPORT.subscriptionProfile])];
  }
  rest.resource ??= [];
  for (const [type, profile] of [
    ['Parameters', ISIK.statusFixedProfile],
    ['Bundle', ISIK.notificationFixedProfile],
  ] as const) {
    if (!rest.resource.some((r) => r.type === type)) rest.resource.push({ type, supportedProfile: [profile] });
  }
}
