import type { ChildProcess } from 'node:child_process';

/** The URL of the `terminus listening` log line of a spawned `terminus serve`. */
export function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.includes('terminus listening'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${out.slice(-2000)}`)));
  });
}
