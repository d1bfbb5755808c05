/**
 * With DATABASE_URL set (CI: `.ci/run`), the suite runs once per store combination a deployment
 * can choose, in one Jest run: PostgreSQL + Redis, PostgreSQL alone (guard state, queues and
 * counters in PostgreSQL) and the embedded defaults (PGlite, in-process queues and counters);
 * PGlite + Redis with TERMINUS_TEST_EMBEDDED_REDIS=1. Without DATABASE_URL only the embedded
 * project runs.
 */
/**
 * ESM-only dependencies (oauth4webapi, @noble/post-quantum and its @noble parts): Jest loads them itself through require(esm) on Node 24.9+;
 * on older Nodes (CI's second runtime, Node 20) it compiles them to CommonJS first. The built
 * server needs neither: Node's own require(esm) loads them.
 */
const [major, minor] = process.versions.node.split('.').map(Number);
const NATIVE_REQUIRE_ESM = major > 24 || (major === 24 && minor >= 9);

const project = (displayName, setupFiles, testPathIgnorePatterns = [], extra = {}) => ({
  displayName,
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', ...testPathIgnorePatterns],
  transform: {
    '^.+\\.ts$': ['ts-jest', { diagnostics: false }],
    ...(NATIVE_REQUIRE_ESM ? {} : { '/node_modules/(oauth4webapi|@noble)/.+\\.js$': ['ts-jest', { diagnostics: false, tsconfig: { allowJs: true } }] }),
  },
  ...(NATIVE_REQUIRE_ESM ? {} : { transformIgnorePatterns: ['/node_modules/(?!(oauth4webapi|@noble)/)'] }),
  setupFiles,
  // Generous: the limit must hold on a busy 2-core machine (stress-ng --cpu 4), where spawning a
  // tsx process alone can take half a minute.
  testTimeout: 180000,
  ...extra,
  setupFilesAfterEnv: ['<rootDir>/test/setup-cpu-times.ts', ...(extra.setupFilesAfterEnv ?? [])],
});

const embedded = project('embedded', ['<rootDir>/test/setup-env.ts', '<rootDir>/test/setup-embedded.ts']);

/**
 * Client-side processes (the CLI as a child process, the attestation helper) and the TPM and card
 * PKI checks (a real swtpm, openssl ocsp) do not depend on how the server keeps its shared state
 * beyond PostgreSQL vs PGlite: the two mixed projects skip them.
 */
const CLIENT_SIDE = [
  '<rootDir>/test/client/cli\\.test\\.ts',
  '<rootDir>/test/guard/asl-clients\\.test\\.ts',
  '<rootDir>/test/attestation-helper/',
  '<rootDir>/test/guard/tpm-attestation\\.test\\.ts',
  '<rootDir>/test/guard/card-pki\\.test\\.ts',
];

/**
 * The practice page in a real Chromium talks to the server only through the guard: one run (on
 * PostgreSQL + Redis, or the embedded store without DATABASE_URL) covers it.
 */
const BROWSER_FILES = ['test/client/practice-page.test.ts'];

/**
 * A file that never reads DATABASE_URL runs the same in a project without it: such files run in
 * `postgres` only, which saves CI a third of its time. `postgres-no-redis` runs the files that test
 * the guard's shared state and the job queue, the parts whose backend Redis selects (SHARED_STATE).
 * test/store-env.js lists them, and the `postgres` project checks the lists on every run.
 */
const { STORE_FREE, REDIS_FREE, WITH_REDIS, SHARED_STATE } = require('./test/store-env');
const sameWithoutRedis = SHARED_STATE.filter((f) => STORE_FREE.includes(f) || REDIS_FREE.includes(f));
if (sameWithoutRedis.length) throw new Error(`test/store-env.js: ${sameWithoutRedis.join(', ')} read no REDIS_URL: without Redis they run as with it, so SHARED_STATE need not list them`);
const paths = (files) => files.map((f) => `<rootDir>/${f.replace(/[.]/g, '\\.')}$`);
const BROWSER = paths(BROWSER_FILES);

/**
 * CI (.ci/run) runs `postgres` in full on the Node LTS first, then the whole suite on the machine's
 * Node with TERMINUS_TEST_LTS_COVERED=1. There `postgres` runs only the files no other project runs
 * on this Node: those that read no store variable, those that need Redis, and the browser test.
 * A file that reads DATABASE_URL but never REDIS_URL runs here in `embedded` (PGlite) and ran on
 * PostgreSQL on the LTS; every other file runs here in `embedded` (and the SHARED_STATE files in
 * `postgres-no-redis` too), and with Redis on the LTS. So every file runs on both Nodes, every store combination on one of them at
 * least, and the deployed one (the LTS on PostgreSQL + Redis) in full.
 */
const POSTGRES_ON_SECOND_NODE = { testMatch: [...STORE_FREE, ...WITH_REDIS, ...BROWSER_FILES].map((f) => `<rootDir>/${f}`) };
const LTS_COVERED = process.env.TERMINUS_TEST_LTS_COVERED === '1';

/** @type {import('jest').Config} */
module.exports = {
  projects: process.env.DATABASE_URL
    ? [
        project('postgres', ['<rootDir>/test/setup-env.ts'], [], { setupFilesAfterEnv: ['<rootDir>/test/setup-env-reads.ts'], ...(LTS_COVERED ? POSTGRES_ON_SECOND_NODE : {}) }),
        project('postgres-no-redis', ['<rootDir>/test/setup-env.ts', '<rootDir>/test/setup-postgres-no-redis.ts'], [], { testMatch: SHARED_STATE.map((f) => `<rootDir>/${f}`) }),
        project('embedded', ['<rootDir>/test/setup-env.ts', '<rootDir>/test/setup-embedded.ts'], [...BROWSER, ...paths(STORE_FREE)]),
        // PGlite + Redis adds little the two above do not cover (BullMQ and Redis state run in
        // `postgres`, PGlite in `embedded`); CI spends that time on the Node LTS run instead.
        ...(process.env.REDIS_URL && process.env.TERMINUS_TEST_EMBEDDED_REDIS === '1' ? [project('embedded-redis', ['<rootDir>/test/setup-env.ts', '<rootDir>/test/setup-embedded-redis.ts'], [...CLIENT_SIDE, ...BROWSER, ...paths(STORE_FREE), ...paths(REDIS_FREE)])] : []),
      ]
    : [embedded],
  testTimeout: 180000,
  // TERMINUS_TEST_WORKERS: more files at a time where the machine has the cores for them.
  maxWorkers: Number(process.env.TERMINUS_TEST_WORKERS) || 2,
  testSequencer: '<rootDir>/test/slow-first-sequencer.js',
  reporters: ['default', '<rootDir>/test/summary-reporter.js', '<rootDir>/test/timings-reporter.js'],
};
