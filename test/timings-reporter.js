// With TERMINUS_TEST_TIMINGS=FILE, writes one line per test file and project at the end of the run:
// `seconds<TAB>project<TAB>file`, slowest first. CI's slowest files are read from there.
const fs = require('node:fs');
const path = require('node:path');

class TimingsReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
    this.rows = [];
  }

  onTestResult(test, result) {
    const seconds = (result.perfStats.end - result.perfStats.start) / 1000;
    const project = test.context.config.displayName?.name ?? 'default';
    this.rows.push([seconds, project, path.relative(this.rootDir, result.testFilePath)]);
  }

  onRunComplete() {
    const file = process.env.TERMINUS_TEST_TIMINGS;
    if (!file) return;
    const lines = this.rows.sort((a, b) => b[0] - a[0]).map(([s, p, f]) => `${s.toFixed(1)}\t${p}\t${f}`);
    fs.appendFileSync(file, `${lines.join('\n')}\n`);
  }
}
module.exports = TimingsReporter;
