import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** `json` (default: one object per line, for collectors) or `pretty` (readable on a terminal). */
export type LogFormat = 'json' | 'pretty';

export function createLogger(level: string, format: LogFormat = 'json'): Logger {
  const options = { level, base: { service: 'terminus' }, timestamp: pino.stdTimeFunctions.isoTime };
  if (format === 'json') return pino(options);
  // In-process and synchronous (no worker thread): a line is on the terminal before the process exits.
  return pino(options, pretty({ sync: true, colorize: Boolean(process.stdout.isTTY), translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }));
}
