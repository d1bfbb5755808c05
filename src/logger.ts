import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** `json` (default: one object per line, for collectors) or `pretty` (readable on a terminal). */
export type LogFormat = 'json' | 'pretty';

/** How long a JSON line may wait in the buffer before it is written. */
const FLUSH_EVERY_MS = 200;

export function createLogger(level: string, format: LogFormat = 'json'): Logger {
  const options = { level, base: { service: 'terminus' }, timestamp: pino.stdTimeFunctions.isoTime };
  if (level === 'silent') return pino(options);
  if (format === 'json') {
    // Asynchronous and buffered (docs/requirements.md#performance-aims: a synchronous write per
    // access-log line cost a sixth of the guarded search's throughput): lines go out in 4 KiB
    // writes or within FLUSH_EVERY_MS; pino writes what is left synchronously when the process
    // exits, crash or not.
    const destination = pino.destination({ dest: 1, sync: false, minLength: 4096 });
    const timer = setInterval(() => {
      try {
        destination.flush();
      } catch {
        clearInterval(timer); // closed: nothing left to flush
      }
    }, FLUSH_EVERY_MS).unref();
    return pino(options, destination);
  }
  // In-process and synchronous (no worker thread): a line is on the terminal before the process exits.
  return pino(options, pretty({ sync: true, colorize: Boolean(process.stdout.isTTY), translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }));
}
