/**
 * Volume: realistic calendars (bench/volume/generate.ts) loaded into PostgreSQL at growing sizes:
 * the load rate, the bytes each stored slot costs (its table and index rows, appointments and
 * patients counted apart), and the cost of retiring past free slots at that size.
 *
 *   BENCH_VOLUME_SIZES=10000,100000,1000000 node --import tsx bench/run.ts volume
 */
import { Pool } from 'pg';
import { retireFreeSlots } from '../src/booking';
import { openDb } from '../src/store/db';
import { migrate } from '../src/store/migrate';
import { Repository } from '../src/store/repository';
import { loadAverage } from './lib/cpu';
import { bytesOfSlots } from './volume/bytes';
import { DEFAULT_VOLUME, loadVolume } from './volume/generate';

const SIZES = (process.env.BENCH_VOLUME_SIZES ?? '10000,100000').split(',').map(Number);

export async function benchVolume(): Promise<string> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) return 'Needs DATABASE_URL (PostgreSQL): the volumes are PostgreSQL-sized.';
  const rows: string[] = [];
  for (const slots of SIZES) for (const indexesAfter of [false, true]) rows.push(await oneSize(databaseUrl, slots, indexesAfter));
  return [
    `Calendars of ${DEFAULT_VOLUME.calendars} practitioners (5 services, weekday hours with a lunch break, Saturday mornings for some, German public holidays closed), 15-minute slots day by day from ${DEFAULT_VOLUME.start.toISOString().slice(0, 10)}; ${DEFAULT_VOLUME.fillRate * 100} % booked, ${DEFAULT_VOLUME.cancelRate * 100} % of bookings cancelled; patients: a tenth of the slots (at most ${DEFAULT_VOLUME.patients}). Written with \`Repository.bulkLoad\` (resource and index rows per chunk of 2,000) on two connections, booking holds beside, each size twice: into the tables with their indexes, and with the secondary indexes dropped and built after the load (\`withIndexesBuiltAfter\`, src/store/deferred-indexes.ts: two builds side by side, the time included); load average ${loadAverage()} at the end.`,
    '',
    '| slots | appointments | secondary indexes | load s | slots/s | bytes per slot (Slot rows: resource, versions, index rows, lookup) | bytes per stored resource of any type | retiring: slots, s, slots/s |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    'Aim: 12 million slots in under 30 minutes (6,700 slots/s); at most 1.5 KB per slot.',
  ].join('\n');
}

async function oneSize(databaseUrl: string, slots: number, indexesAfter: boolean): Promise<string> {
  const schema = `bench_volume_${slots}`;
  const admin = new Pool({ connectionString: databaseUrl, max: 1 });
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const db = await openDb({ databaseUrl, schema, poolSize: 4 });
  try {
    await migrate(db);
    const repo = new Repository(db, 'http://localhost:8080/fhir');
    const spec = { ...DEFAULT_VOLUME, slots, patients: Math.min(DEFAULT_VOLUME.patients, Math.max(1000, Math.floor(slots / 10))) };
    let shown = 0;
    const report = await loadVolume(repo, spec, {
      parallel: 2,
      indexesAfter,
      progress: (n) => {
        if (n - shown >= 1_000_000) {
          shown = n;
          process.stdout.write(`  ${n} slots\n`);
        }
      },
    });
    const { rows: tables } = await admin.query<{ relname: string }>("SELECT c.relname FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r'", [schema]);
    for (const t of tables) await admin.query(`ANALYZE ${schema}.${t.relname}`);
    const perSlot = await bytesOfSlots(async (sql, values) => (await admin.query(sql, values)).rows, schema, report.slots);
    const { rows: all } = await admin.query<{ bytes: string; n: string }>(
      `SELECT (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relkind = 'r') AS bytes,
              (SELECT count(*) FROM ${schema}.resource) AS n`,
      [schema],
    );
    // Retiring: the slots of the first half of the volume's days are past, as they would be a year on.
    const cutoff = new Date((DEFAULT_VOLUME.start.getTime() + new Date(`${report.lastDay}T00:00:00Z`).getTime()) / 2);
    const t0 = performance.now();
    const retired = await retireFreeSlots(repo, cutoff);
    const retireS = (performance.now() - t0) / 1000;
    return `| ${report.slots.toLocaleString('en')} | ${report.appointments.toLocaleString('en')} | ${indexesAfter ? 'built after the load' : 'kept'} | ${report.seconds.toFixed(0)} | ${(report.slots / report.seconds).toFixed(0)} | ${perSlot.toFixed(0)} | ${(Number(all[0].bytes) / Number(all[0].n)).toFixed(0)} | ${retired.toLocaleString('en')}, ${retireS.toFixed(1)}, ${(retired / retireS).toFixed(0)} |`;
  } finally {
    await db.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  }
}
