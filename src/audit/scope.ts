import { AsyncLocalStorage } from 'node:async_hooks';
import type { AuditParties } from '../server-lib/audit-port';

/** Who asks, and how the request is named, for every AuditEvent recorded while it runs. */
export interface RequestAudit {
  parties: AuditParties;
  requestId?: string;
  traceId?: string;
}

/** One interaction being handled (a request, a Bundle entry, a job) and what it wrote. */
export interface InteractionFrame {
  request: RequestAudit;
  /** The operation the interaction is (`book`), named by the AuditEvents of its writes. */
  operation?: string;
  /** AuditEvents its writes stored (each in its write's transaction). */
  writes: number;
}

/**
 * The interaction a write belongs to, carried through the async calls of its handling as
 * OpenTelemetry carries a trace context: a write deep in a booking cascade or a transaction
 * Bundle is recorded with the request that caused it, without every domain call passing it on.
 * Outside a frame (imports, the server's own bookkeeping) nothing is recorded.
 */
const frames = new AsyncLocalStorage<InteractionFrame>();

export function currentFrame(): InteractionFrame | undefined {
  return frames.getStore();
}

export function inFrame<T>(frame: InteractionFrame, run: () => Promise<T>): Promise<T> {
  return frames.run(frame, run);
}
