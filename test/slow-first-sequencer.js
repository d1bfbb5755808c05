// Runs the slowest test files first, so that no long file starts last and keeps one worker busy
// while the others are idle. Jest does this itself from the durations it cached in an earlier run;
// a clean checkout (CI) has no such cache, and Jest falls back to file size, which says little about
// files that spawn servers, browsers or a TPM. test/file-times.tsv holds the seconds each file took
// per project in a CI run (`seconds<TAB>project<TAB>file`, as test/timings-reporter.js writes them;
// refresh it from TERMINUS_TEST_TIMINGS when files are added or get slower). A file not listed is
// placed by Jest's own order after the listed ones of similar cost.
const fs = require('node:fs');
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const TIMES = path.join(__dirname, 'file-times.tsv');

function knownSeconds() {
  const seconds = new Map();
  if (!fs.existsSync(TIMES)) return seconds;
  for (const line of fs.readFileSync(TIMES, 'utf8').split('\n')) {
    const [s, project, file] = line.split('\t');
    if (file) seconds.set(`${project}\t${file}`, Number(s));
  }
  return seconds;
}

class SlowFirstSequencer extends Sequencer {
  sort(tests) {
    const ordered = super.sort(tests);
    const seconds = knownSeconds();
    if (seconds.size === 0) return ordered;
    const rank = new Map(ordered.map((t, i) => [t, i]));
    const cost = (t) => seconds.get(`${t.context.config.displayName?.name ?? 'default'}\t${path.relative(t.context.config.rootDir, t.path)}`) ?? 5;
    return [...ordered].sort((a, b) => cost(b) - cost(a) || rank.get(a) - rank.get(b));
  }
}

module.exports = SlowFirstSequencer;
