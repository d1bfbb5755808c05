import type { OperationDefinition, Subscription } from '@medplum/fhirtypes';
import { scopeNeed } from '../../common/smart-scopes';
import { parseInputParameters } from './parameters';
import { definitionOf, type Operation } from './registry';
import { badRequest } from '../../server-lib/outcomes';
import { BACKPORT, readChannel, eventsBetween, notificationBundle } from '../../subscriptions';
import { type FhirEnv, type FhirRequest, type FhirResponse } from '../request';

const definition = {
  resourceType: 'OperationDefinition',
  id: 'backport-subscription-events',
  url: BACKPORT.eventsOperation,
  name: 'R5SubscriptionEvents',
  status: 'active',
  kind: 'operation',
  code: 'events',
  resource: ['Subscription'],
  system: false,
  type: false,
  instance: true,
  affectsState: false,
  parameter: [
    { name: 'eventsSinceNumber', use: 'in', min: 0, max: '1', type: 'string' },
    { name: 'eventsUntilNumber', use: 'in', min: 0, max: '1', type: 'string' },
    { name: 'content', use: 'in', min: 0, max: '1', type: 'code' },
    { name: 'return', use: 'out', min: 1, max: '1', type: 'Bundle' },
  ],
} as const satisfies OperationDefinition;

/** Events one `$events` call returns at most; a client pages with eventsSinceNumber. */
const MAX_EVENTS = 500;

/**
 * `$events` (backport IG Operations, ISiK point 7): the stored events of one Subscription between
 * `eventsSinceNumber` and `eventsUntilNumber` (both inclusive, both optional), as a history
 * notification Bundle of `type` `query-event`, id-only whatever `content` asks.
 */
export const eventsOperation: Operation = {
  definition: definitionOf(definition),
  // The caller's own Subscription (instance level) or those it may search (type level).
  scopes: (target) => [scopeNeed('Subscription', target.id ? 'r' : 's')],
  handler: (req, env, target) => events(req, env, target.id),
};

async function events(req: FhirRequest, env: FhirEnv, id: string | undefined): Promise<FhirResponse> {
  if (!id) throw badRequest('$events is invoked on one Subscription: Subscription/[id]/$events', 'Subscription');
  const input = parseInputParameters(definition, req);
  const sub = await env.repo.read<Subscription>('Subscription', id, req.caller);
  const channel = await readChannel(env.repo.db, id);
  const total = channel?.eventsSinceStart ?? 0;
  const since = eventNumber('eventsSinceNumber', input.eventsSinceNumber) ?? 1;
  const until = Math.min(eventNumber('eventsUntilNumber', input.eventsUntilNumber) ?? total, total);
  const found = since <= until ? await eventsBetween(env.repo.db, id, since, until, MAX_EVENTS) : [];
  const bundle = notificationBundle(
    { baseUrl: env.baseUrl, subscriptionId: id, topic: sub.criteria, status: sub.status, type: 'query-event', eventsSinceStart: total, events: found, errorCode: channel?.errorCode },
    env.repo.now(),
  );
  return { status: 200, body: bundle };
}

function eventNumber(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,15}$/.test(raw.trim())) throw badRequest(`${name} must be a non-negative event number, got "${raw.slice(0, 20)}"`, name);
  return Number(raw.trim());
}
