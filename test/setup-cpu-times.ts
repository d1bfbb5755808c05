import fs from 'node:fs';
import path from 'node:path';

/**
 * With TERMINUS_TEST_TIMINGS=FILE, appends this file's CPU seconds to FILE.cpu:
 * `cpu<TAB>children<TAB>project<TAB>file<TAB>PGlite stores opened` (test/helpers/context.ts). `cpu` is the Jest worker's own (the test, the app
 * in-process, PGlite); `children` the processes it started and reaped (servers, CLIs, swtpm,
 * openssl). The database and Redis servers are not counted. The wall times come from
 * test/timings-reporter.js; the CPU says which files to make cheaper on a CPU-bound machine.
 */
const out = process.env.TERMINUS_TEST_TIMINGS;
if (out) {
  const ticks = () => {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100; // cutime + cstime (fields 16, 17)
  };
  // The projects differ only in which store variables test/setup-*.ts leave set.
  const project = !process.env.DATABASE_URL ? 'embedded' : !process.env.REDIS_URL ? 'postgres-no-redis' : 'postgres';
  const own = process.cpuUsage();
  const children = ticks();
  afterAll(() => {
    const used = process.cpuUsage(own);
    const file = path.relative(path.join(__dirname, '..'), expect.getState().testPath ?? '');
    fs.appendFileSync(`${out}.cpu`, `${((used.user + used.system) / 1e6).toFixed(1)}\t${(ticks() - children).toFixed(1)}\t${project}\t${file}\t${(globalThis as { terminusPgliteOpens?: number }).terminusPgliteOpens ?? 0}\n`);
  });
}
