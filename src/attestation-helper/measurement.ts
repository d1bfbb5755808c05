import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { logEvent, parseEventLog, replaySha256, specIdHeader } from '../common/tpm-event-log';
import type { TpmTools } from './tpm-tools';

/** EV_EVENT_TAG (PC Client PFP §10.4.1): the helper's measurements (EV_IPL belongs to PCRs 8/9). */
export const EV_EVENT_TAG = 0x00000006;
export const CLIENT_PCR = 23;

/**
 * SHA-256 over a file or a folder (every regular file under it, sorted by relative path, each as
 * path NUL content NUL): what the helper extends into PCR 23 at start.
 */
export async function measurePath(target: string): Promise<Buffer> {
  const h = crypto.createHash('sha256');
  const stat = await fs.stat(target);
  if (stat.isFile()) return h.update(await fs.readFile(target)).digest();
  const files: string[] = [];
  const walk = async (dir: string) => {
    for (const e of await fs.readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && e.name !== 'node_modules' && !e.name.startsWith('.')) await walk(p);
      else if (e.isFile()) files.push(p);
    }
  };
  await walk(target);
  for (const f of files.map((p) => path.relative(target, p)).sort()) {
    h.update(f).update('\0').update(await fs.readFile(path.join(target, f))).update('\0');
  }
  return h.digest();
}

/**
 * The event log the helper returns: the platform's log (firmware, if any) plus the helper's own
 * PCR 23 events since the TPM last reset, kept in `stateFile` across helper restarts. At start the
 * stored events are kept only if they still replay to PCR 23; a TPM that was reset starts afresh,
 * a PCR 23 with an unknown history is reset (locality 0 may) so that the log stays the truth.
 */
export class HelperEventLog {
  private own: Buffer[] = [];

  constructor(
    private readonly tpm: TpmTools,
    private readonly stateFile: string,
    private readonly platformLog: Buffer,
  ) {}

  static async open(tpm: TpmTools, stateFile: string, platformLogFile?: string): Promise<HelperEventLog> {
    const platform = platformLogFile ? await fs.readFile(platformLogFile) : specIdHeader();
    parseEventLog(platform); // refuse a platform log that would not parse on the server either
    const log = new HelperEventLog(tpm, stateFile, platform);
    await log.recover();
    return log;
  }

  private async recover(): Promise<void> {
    const stored = await fs.readFile(this.stateFile).catch(() => undefined);
    const events = stored ? parseEventLog(Buffer.concat([specIdHeader(), stored])).events.filter((e) => e.pcrIndex === CLIENT_PCR) : [];
    const platformEvents = parseEventLog(this.platformLog).events;
    const current = (await this.tpm.pcrRead([CLIENT_PCR])).get(CLIENT_PCR)!;
    const replayed = replaySha256([...platformEvents, ...events], [CLIENT_PCR]).get(CLIENT_PCR)!;
    if (stored && replayed.equals(current)) {
      this.own = [stored];
      return;
    }
    const fresh = replaySha256(platformEvents, [CLIENT_PCR]).get(CLIENT_PCR)!;
    if (!fresh.equals(current)) await this.tpm.pcrReset(CLIENT_PCR);
    this.own = [];
    await this.save();
  }

  /** Extends PCR 23 with `digest` and records the event. */
  async measure(digest: Buffer, description: string): Promise<void> {
    await this.tpm.pcrExtend(CLIENT_PCR, digest);
    this.own.push(logEvent(CLIENT_PCR, EV_EVENT_TAG, digest, Buffer.from(description, 'utf8')));
    await this.save();
  }

  private async save(): Promise<void> {
    await fs.mkdir(path.dirname(this.stateFile), { recursive: true, mode: 0o700 });
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    await fs.writeFile(tmp, Buffer.concat(this.own), { mode: 0o600 });
    await fs.rename(tmp, this.stateFile);
  }

  bytes(): Buffer {
    return Buffer.concat([this.platformLog, ...this.own]);
  }
}
