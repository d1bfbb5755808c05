import { issue, OperationOutcomeError } from '../server-lib/outcomes';

/**
 * Why a Subscription is refused: 422 with a coded issue naming the element (backport IG
 * "components": a server SHOULD reject a Subscription it cannot honour rather than change it).
 */
const refuse = (code: 'not-supported' | 'value' | 'invalid' | 'security', diagnostics: string, expression: string) =>
  new OperationOutcomeError(422, [issue(code, diagnostics, expression)]);

export const unsupportedTopic = (criteria: string | undefined, supported: string[]) =>
  refuse('not-supported', `criteria "${criteria ?? ''}" is not a supported topic (supported: ${supported.join(', ')})`, 'Subscription.criteria');
export const invalidFilter = (message: string) => refuse('not-supported', message, 'Subscription.criteria.extension');
export const unsupportedChannelType = (type: string | undefined) =>
  refuse('not-supported', `channel.type "${type ?? ''}" is not supported; only rest-hook`, 'Subscription.channel.type');
export const unsupportedPayloadContent = (content: string) =>
  refuse('not-supported', `payload content "${content}" is not supported; only id-only (ISiKSubscription)`, 'Subscription.channel.payload.extension');
export const unsupportedPayloadType = (payload: string | undefined) =>
  refuse('not-supported', `channel.payload "${payload ?? ''}" is not supported; use application/fhir+json or application/fhir+xml`, 'Subscription.channel.payload');
export const invalidEndpoint = (message: string) => refuse('security', message, 'Subscription.channel.endpoint');
export const invalidHeader = (message: string) => refuse('value', message, 'Subscription.channel.header');
export const invalidStatus = (message: string) => refuse('value', message, 'Subscription.status');
