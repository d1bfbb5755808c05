import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort } from './swtpm';

/**
 * A PostgreSQL primary and a streaming replica of it, each a cluster of its own in a temporary
 * folder on loopback ports: initdb, then pg_basebackup -R (the replica streams from the primary
 * from its first start). The machine's own server is left alone (its pg_hba allows no replication).
 * Run as root, the clusters belong to the `postgres` user, as Debian's do.
 */
export interface ReplicatedCluster {
  primaryUrl: string;
  replicaUrl: string;
  /** Stops the replica's WAL replay (it keeps answering, further and further behind). */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Stops the replica at once (as a crash would). */
  stopReplica(): void;
  startReplica(): void;
  /** Waits until the replica has replayed everything the primary has written so far. */
  caughtUp(): Promise<void>;
  stop(): void;
}

/** Debian's server binaries of the newest installed major (initdb is not on PATH there). */
export function postgresBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  const majors = fs.existsSync(base) ? fs.readdirSync(base).filter((v) => fs.existsSync(path.join(base, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  return majors[0] && path.join(base, majors[0], 'bin');
}

export async function startReplicatedCluster(): Promise<ReplicatedCluster> {
  const bin = postgresBin();
  if (!bin) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  const asRoot = process.getuid?.() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'terminus-replica-'));
  if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
  const run = (tool: string, args: string[]) => {
    const argv = asRoot ? ['runuser', '-u', 'postgres', '--', path.join(bin, tool), ...args] : [path.join(bin, tool), ...args];
    const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr || r.stdout}`);
  };
  const primary = path.join(dir, 'primary');
  const replica = path.join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const started: string[] = [];
  const ctl = (data: string, action: 'start' | 'stop') =>
    action === 'start' ? run('pg_ctl', ['-D', data, '-l', path.join(dir, `${path.basename(data)}.log`), '-w', '-t', '120', 'start']) : run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
  const stopAll = () => {
    for (const data of started.splice(0).reverse()) {
      try {
        ctl(data, 'stop');
      } catch {
        // already stopped
      }
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    // -N: no fsync while initdb writes (a test cluster); trust on loopback, replication included.
    run('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '-N']);
    fs.appendFileSync(
      path.join(primary, 'postgresql.conf'),
      [`port = ${primaryPort}`, "listen_addresses = '127.0.0.1'", `unix_socket_directories = '${dir}'`, 'wal_level = replica', 'max_wal_senders = 4', 'fsync = off', 'shared_buffers = 32MB', 'max_connections = 200', ''].join('\n'),
    );
    ctl(primary, 'start');
    started.push(primary);
    run('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replica, '-R', '-X', 'stream']);
    fs.appendFileSync(path.join(replica, 'postgresql.conf'), `port = ${replicaPort}\nhot_standby = on\n`);
    ctl(replica, 'start');
    started.push(replica);
  } catch (err) {
    stopAll();
    throw err;
  }
  const primaryUrl = `postgresql://postgres@127.0.0.1:${primaryPort}/postgres`;
  const replicaUrl = `postgresql://postgres@127.0.0.1:${replicaPort}/postgres`;
  const onReplica = async (sql: string) => {
    const c = new Client({ connectionString: replicaUrl });
    await c.connect();
    try {
      return (await c.query(sql)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    primaryUrl,
    replicaUrl,
    pauseReplay: async () => void (await onReplica('SELECT pg_wal_replay_pause()')),
    resumeReplay: async () => void (await onReplica('SELECT pg_wal_replay_resume()')),
    stopReplica: () => {
      ctl(replica, 'stop');
      started.splice(started.indexOf(replica), 1);
    },
    startReplica: () => {
      ctl(replica, 'start');
      started.push(replica);
    },
    async caughtUp() {
      const c = new Client({ connectionString: primaryUrl });
      await c.connect();
      try {
        const target = (await c.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
        for (let i = 0; ; i++) {
          const [row] = await onReplica(`SELECT pg_last_wal_replay_lsn() >= '${target}'::pg_lsn AS done`);
          if (row.done) return;
          if (i > 600) throw new Error(`the replica did not replay up to ${target}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        await c.end();
      }
    },
    stop: stopAll,
  };
}
