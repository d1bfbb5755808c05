import { main } from '../../src/client/cli';
import type { CliIo } from '../../src/client/cli-commands';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout as JSON, when it is. */
  json: any;
}

/**
 * `terminus-client` in this process (`main`), with its output captured, a terminal or not, and
 * `env` set for the run only (TERMINUS_CLIENT_HOME, passwords, ${VAR}s of a .kon file).
 */
export async function runCli(args: string[], o: { env?: Record<string, string>; tty?: boolean } = {}): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (t) => out.push(t), err: (t) => err.push(t), isTTY: o.tty ?? false };
  const env = o.env ?? {};
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    const code = await main(args, io);
    const stdout = out.join('');
    let json: unknown;
    try {
      json = JSON.parse(stdout);
    } catch {
      json = undefined;
    }
    return { code, stdout, stderr: err.join(''), json };
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
