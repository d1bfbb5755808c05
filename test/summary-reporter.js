// Closes every run with one plain line, `Tests: N passed, N failed[, N skipped]`, after Jest's own
// summary (written at exit, since Jest prints its summary after the reporters' onRunComplete):
// the form CI tooling reads whatever the test runner.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    const line = `Tests: ${results.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`;
    process.once('exit', () => process.stdout.write(line));
  }
}
module.exports = SummaryReporter;
