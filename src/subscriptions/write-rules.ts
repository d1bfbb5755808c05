import type { Extension, Subscription } from '@medplum/fhirtypes';
import type { AppContext } from '../context';
import type { WriteEvent } from '../store';
import type { KeyEncryption } from '../server-lib/key-encryption';
import { EXT, PAYLOAD_TYPES } from './backport';
import { ChannelHeaderError, maskChannelHeader, openHeaders, resolveHeaders, sealHeaders, type ChannelHeader } from './channel-headers';
import { readChannel, stageSealedHeaders } from './channel-store';
import { endpointProblem } from './endpoint-policy';
import * as refuse from './errors';
import { FilterCriteriaError, parseFilterCriteria } from './filter-criteria';
import { findTopic, topics, type Topic } from './topics';

/**
 * ISiKSubscriptionTermin rules for every Subscription write (REST, transaction Bundle, PATCH),
 * as a list of named checks; then the status the server allows and the write-only headers.
 */
export async function onSubscriptionWrite(ctx: AppContext, kek: KeyEncryption, event: WriteEvent): Promise<void> {
  if (event.interaction === 'delete' || !event.resource) return;
  const sub = event.resource as Subscription;
  const previous = event.previous as Subscription | undefined;
  const topic = checkTopic(sub);
  checkFilter(sub, topic);
  checkChannelType(sub);
  checkPayload(sub);
  statePayloadContent(sub);
  const problem = endpointProblem(sub.channel?.endpoint, ctx.config.production);
  if (problem) throw refuse.invalidEndpoint(problem);

  const stored = previous ? await readChannel(event.repo.db, previous.id as string) : undefined;
  const before = stored ? storedHeaders(kek, stored.headersSealed) : [];
  const headers = (() => {
    try {
      return resolveHeaders(sub.channel.header ?? [], before);
    } catch (err) {
      if (err instanceof ChannelHeaderError) throw refuse.invalidHeader(err.message);
      throw err;
    }
  })();
  sub.status = nextStatus(sub, previous, JSON.stringify(headers) !== JSON.stringify(before));
  // What the resource shows from now on; the real values go to the mirror trigger, sealed.
  if (headers.length) sub.channel.header = headers.map(maskChannelHeader);
  await stageSealedHeaders(event.repo.db, sealHeaders(kek, headers));
}

/** The stored headers in clear; none when the key that sealed them is gone (the client then sends them in clear). */
function storedHeaders(kek: KeyEncryption, sealed: string | null): ChannelHeader[] {
  try {
    return openHeaders(kek, sealed);
  } catch {
    return [];
  }
}

function checkTopic(sub: Subscription): Topic {
  const topic = findTopic(sub.criteria);
  if (!topic) throw refuse.unsupportedTopic(sub.criteria, topics().map((t) => t.url));
  return topic;
}

function checkFilter(sub: Subscription, topic: Topic): void {
  const filters = extensions((sub as { _criteria?: { extension?: Extension[] } })._criteria?.extension, EXT.filterCriteria);
  for (const f of filters) {
    if (typeof f.valueString !== 'string') throw refuse.invalidFilter('backport-filter-criteria needs a valueString');
    try {
      parseFilterCriteria(f.valueString, topic);
    } catch (err) {
      if (err instanceof FilterCriteriaError) throw refuse.invalidFilter(err.message);
      throw err;
    }
  }
  if (filters.length > 1) throw refuse.invalidFilter('give the filter criteria in one backport-filter-criteria extension (parameters are joined by &)');
}

function checkChannelType(sub: Subscription): void {
  // ISiKSubscription: customChannelType 0..0, rest-hook MUSS.
  if (sub.channel?.type !== 'rest-hook' || extensions((sub.channel as { _type?: { extension?: Extension[] } })._type?.extension, EXT.channelType).length) {
    throw refuse.unsupportedChannelType(sub.channel?.type);
  }
}

function checkPayload(sub: Subscription): void {
  const payload = sub.channel.payload;
  if (!payload || !(PAYLOAD_TYPES as readonly string[]).includes(payload.split(';')[0].trim().toLowerCase())) throw refuse.unsupportedPayloadType(payload);
  const content = payloadContent(sub);
  if (content !== 'id-only') throw refuse.unsupportedPayloadContent(content);
}

/**
 * Accepted with modification: a Subscription without `backport-payload-content` gets id-only
 * written in, so a read shows what the server delivers (backport IG "payloads": the server
 * states the content it sends).
 */
function statePayloadContent(sub: Subscription): void {
  const channel = sub.channel as Subscription['channel'] & { _payload?: { extension?: Extension[] } };
  if (extensions(channel._payload?.extension, EXT.payloadContent).length) return;
  channel._payload = { ...channel._payload, extension: [...(channel._payload?.extension ?? []), { url: EXT.payloadContent, valueCode: 'id-only' }] };
}

/** `backport-payload-content`; absent means id-only, what this server sends. */
export function payloadContent(sub: Subscription): string {
  const ext = extensions((sub.channel as { _payload?: { extension?: Extension[] } })._payload?.extension, EXT.payloadContent)[0];
  return ext ? String(ext.valueCode ?? '') : 'id-only';
}

/**
 * Backport IG "channels": a new Subscription is `requested` whatever the client sent. Later the
 * client may turn it `off`, or ask for (re)activation with `requested`/`active`, which restarts
 * the handshake; `active` and `error` are the server's to set ("errors": never reset silently).
 * A changed channel of an active subscription is handshaken again too; its undelivered events
 * are kept for after the handshake (the mirror trigger skips them only coming from off or error).
 */
function nextStatus(sub: Subscription, previous: Subscription | undefined, headersChanged: boolean): Subscription['status'] {
  if (!previous) return 'requested';
  const asked = sub.status;
  if (asked === 'off') return 'off';
  if (asked === 'error') {
    if (previous.status !== 'error') throw refuse.invalidStatus('status error is set by the server only');
    return 'error';
  }
  if (asked === previous.status && !headersChanged && !channelChanged(sub, previous)) return previous.status;
  return 'requested';
}

/** A new endpoint or payload type (or header set) is handshaken again. */
function channelChanged(sub: Subscription, previous: Subscription): boolean {
  return sub.channel.endpoint !== previous.channel.endpoint || sub.channel.payload !== previous.channel.payload;
}

function extensions(list: Extension[] | undefined, url: string): Extension[] {
  return (list ?? []).filter((e) => e.url === url);
}
