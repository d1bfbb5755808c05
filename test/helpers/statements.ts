import { PGlite } from '@electric-sql/pglite';
import { Client } from 'pg';

/**
 * Every statement the store's driver sends (PostgreSQL's `pg` client or PGlite, whichever the
 * project runs on), recorded from `start()` until `stop()`: for tests that count round trips.
 */
export function statementRecorder(): { sent: string[]; senders: unknown[]; start(): void; stop(): void } {
  const sent: string[] = [];
  /** Who sent each statement (the connection), in step with `sent`. */
  const senders: unknown[] = [];
  const restore: (() => void)[] = [];
  const wrap = (proto: Record<string, unknown>, method: string) => {
    const original = proto[method] as (...args: unknown[]) => unknown;
    proto[method] = function (this: unknown, q: unknown, ...rest: unknown[]) {
      sent.push(typeof q === 'string' ? q : String((q as { text?: string }).text));
      senders.push(this);
      return original.call(this, q, ...rest);
    };
    restore.push(() => (proto[method] = original));
  };
  return {
    sent,
    senders,
    start() {
      wrap(Client.prototype as unknown as Record<string, unknown>, 'query');
      wrap(PGlite.prototype as unknown as Record<string, unknown>, 'query');
      wrap(PGlite.prototype as unknown as Record<string, unknown>, 'exec');
    },
    stop() {
      for (const undo of restore.splice(0)) undo();
    },
  };
}
