import crypto from 'node:crypto';
import type { Bundle, OperationDefinition } from '@medplum/fhirtypes';
import { scopeNeed } from '../../common/smart-scopes';
import { parseInputParameters, type InputParameters } from './parameters';
import { definitionOf, type Operation } from './registry';
import { badRequest } from '../../server-lib/outcomes';
import { BACKPORT, readChannels, statusParameters } from '../../subscriptions';
import { type FhirEnv, type FhirRequest, type FhirResponse } from '../request';
import type { Repository } from '../../store';
import type { Subscription } from '@medplum/fhirtypes';

const definition = {
  resourceType: 'OperationDefinition',
  id: 'backport-subscription-status',
  url: BACKPORT.statusOperation,
  name: 'R5SubscriptionStatus',
  status: 'active',
  kind: 'operation',
  code: 'status',
  resource: ['Subscription'],
  system: false,
  type: true,
  instance: true,
  affectsState: false,
  parameter: [
    { name: 'id', use: 'in', min: 0, max: '*', type: 'id' },
    { name: 'status', use: 'in', min: 0, max: '*', type: 'code' },
    { name: 'return', use: 'out', min: 1, max: '1', type: 'Bundle' },
  ],
} as const satisfies OperationDefinition;

/** Subscriptions one `$status` call reports on at most (type level). */
const MAX_STATUS = 1000;

/**
 * `$status` (backport IG Operations): instance level the one Subscription, type level every
 * Subscription the caller may read, optionally narrowed by `id` and `status` (OR within each).
 * Answers a `searchset` Bundle of status Parameters (`type` = `query-status`).
 */
export const statusOperation: Operation = {
  definition: definitionOf(definition),
  // The caller's own Subscription (instance level) or those it may search (type level).
  scopes: (target) => [scopeNeed('Subscription', target.id ? 'r' : 's')],
  handler: (req, env, target) => status(req, env, target.id),
};

async function status(req: FhirRequest, env: FhirEnv, id: string | undefined): Promise<FhirResponse> {
  const input = parseInputParameters(definition, req);
  const subs = id ? [await env.repo.read<Subscription>('Subscription', id, req.caller)] : await visibleSubscriptions(req, env.repo, input);
  const channels = new Map((await readChannels(env.repo.db, subs.map((s) => s.id as string))).map((c) => [c.id, c]));
  const entry = subs.map((s) => {
    const c = channels.get(s.id as string);
    return {
      fullUrl: `urn:uuid:${crypto.randomUUID()}`,
      resource: statusParameters({
        baseUrl: env.baseUrl,
        subscriptionId: s.id as string,
        topic: s.criteria,
        status: s.status,
        type: 'query-status',
        eventsSinceStart: c?.eventsSinceStart ?? 0,
        errorCode: c?.errorCode,
        lastDeliveryAt: c?.lastSuccessAt,
      }),
      search: { mode: 'match' as const },
    };
  });
  const bundle: Bundle = { resourceType: 'Bundle', type: 'searchset', total: entry.length, entry };
  return { status: 200, body: bundle };
}

async function visibleSubscriptions(req: FhirRequest, repo: Repository, input: InputParameters<typeof definition>): Promise<Subscription[]> {
  const ids = values(input.id);
  const statuses = values(input.status);
  for (const s of statuses) if (!['requested', 'active', 'error', 'off'].includes(s)) throw badRequest(`status "${s}" is not a Subscription status`, 'status');
  const filters = [];
  if (ids.length) filters.push({ chain: [], param: '_id', values: ids });
  if (statuses.length) filters.push({ chain: [], param: 'status', values: statuses });
  const found = await repo.search(
    { resourceType: 'Subscription', filters, count: MAX_STATUS, offset: 0, sort: [], include: [], revinclude: [], totalOnly: false },
    req.caller,
  );
  return found.resources as Subscription[];
}

/** Values of a repeating parameter, repeated and comma-joined alike. */
function values(given: readonly string[]): string[] {
  return given.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
}
