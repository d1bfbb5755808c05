/**
 * Which test files read the store selection from the environment. The projects of jest.config.js
 * differ in nothing else (test/setup-*.ts delete DATABASE_URL or REDIS_URL), so a file that never
 * reads a variable runs the same with or without it, and CI runs it where the answer can differ
 * only. test/setup-env-reads.ts checks both lists in every run of the `postgres` project (both
 * variables set): a listed file that reads a variable it is listed as not reading fails there.
 */

/**
 * Read neither DATABASE_URL nor REDIS_URL (they open their own store, or none): run in `postgres`
 * only, which CI runs on both Node versions.
 */
const STORE_FREE = [
  'test/audit/cli.test.ts',
  'test/audit/serialisation.test.ts',
  'test/client/kon-file.test.ts',
  'test/client/p12-card.test.ts',
  'test/guard/anchor-source.test.ts',
  'test/guard/tsl-signature.test.ts',
  'test/booking/patch/fhirpath-patch.test.ts',
  'test/booking/patch/json-patch.test.ts',
  'test/client/calendar-plan.test.ts',
  'test/client/client-inputs.test.ts',
  'test/client/key-store.test.ts',
  'test/client/own-bins.test.ts',
  'test/client/practice-page-parts.test.ts',
  'test/client/server-tls.test.ts',
  'test/client/practice-page-modules.test.ts',
  'test/config.test.ts',
  'test/demo/demo.test.ts',
  'test/deploy-make-env.test.ts',
  'test/deploy-nginx.test.ts',
  'test/fhir/formats.test.ts',
  'test/fhir/operation-parameters.test.ts',
  'test/fhir/shared-answers.test.ts',
  'test/fhir/validation.test.ts',
  'test/fixtures.test.ts',
  'test/guard/asl-vectors.test.ts',
  'test/guard/pep/required-scopes.test.ts',
  'test/guard/policy-rules.test.ts',
  'test/ops-startup.test.ts',
  'test/ops-workload-token.test.ts',
  'test/common/opening-hours.test.ts',
  'test/common/vocabulary.test.ts',
  'test/server.test.ts',
  'test/store/extract-absent.test.ts',
  'test/store/pglite-queue.test.ts',
  'test/store/retried-transaction.test.ts',
  'test/subscriptions/group-commit.test.ts',
  'test/subscriptions/rest-hook.test.ts',
  'test/tls/server-tls.test.ts',
  'test/tls/ocsp-stapler.test.ts',
];

/** Read DATABASE_URL, never REDIS_URL: `postgres-no-redis` would run them exactly as `postgres` does. */
const REDIS_FREE = [
  'test/audit/access.test.ts',
  'test/audit/recording.test.ts',
  'test/audit/tamper.test.ts',
  'test/bench/curve.test.ts',
  'test/bench/volume-generate.test.ts',
  'test/booking/slot-retention.test.ts',
  'test/store/token-values.test.ts',
  'test/store/deferred-indexes.test.ts',
  'test/client/konnektor.test.ts',
  'test/client/signing-proxy.test.ts',
  'test/guard/card-tsl.test.ts',
  'test/app.test.ts',
  'test/booking/book.test.ts',
  'test/booking/concurrency.test.ts',
  'test/booking/flows.test.ts',
  'test/booking/invariants.test.ts',
  'test/booking/patch.test.ts',
  'test/booking/patients-as-users.test.ts',
  'test/booking/rejections.test.ts',
  'test/booking/round-trips.test.ts',
  'test/client/cli-fixture-store.test.ts',
  'test/fhir/errors.test.ts',
  'test/fhir/form-search.test.ts',
  'test/fhir/hostile-input.test.ts',
  'test/fhir/isik-stufe5.test.ts',
  'test/fhir/rest.test.ts',
  'test/fhir/search-results.test.ts',
  'test/fhir/stored-json.test.ts',
  'test/guard/warm-up.test.ts',
  'test/ops-metrics.test.ts',
  'test/store/batched-reads.test.ts',
  'test/store/connection-loss.test.ts',
  'test/store/index-keys.test.ts',
  'test/store/index-rows.test.ts',
  'test/store/index-writer.test.ts',
  'test/store/pool.test.ts',
  'test/store/repository-retry.test.ts',
  'test/store/repository.test.ts',
  'test/store/search.test.ts',
  'test/store/window-cache.test.ts',
  'test/store/write-interceptors.test.ts',
  'test/subscriptions/channel-update.test.ts',
  'test/subscriptions/events.test.ts',
  'test/subscriptions/fan-out-batches.test.ts',
  'test/subscriptions/lifecycle.test.ts',
  'test/subscriptions/rules.test.ts',
];

/**
 * Files with tests that run only where both DATABASE_URL and REDIS_URL are set (`postgres`): the other
 * projects skip them.
 */
const WITH_REDIS = [
  'test/guard/rate-limit.test.ts',
  'test/ops-faults.test.ts',
  'test/ops-redis.test.ts',
  'test/ops-tracing.test.ts',
  'test/store/read-replicas.test.ts',
];

/**
 * What `postgres-no-redis` runs: the files that test what the guard's shared state
 * (src/guard/state/: single-use values, nonces, counters) and the job queue do, each operation
 * and its behaviour across replicas and time, and the flows built on them (sessions, replay,
 * refresh families, codes, ASL handshakes, rate limits, queued bookings and deliveries). Only the
 * backend of those differs between `postgres` (Redis) and `postgres-no-redis` (PostgreSQL);
 * every other file uses the same operations through these flows, and runs with Redis
 * (`postgres`) and on the embedded store, whose state is the same SQL on PGlite (`embedded`).
 */
const SHARED_STATE = [
  'test/booking/async.test.ts',
  'test/guard/asl.test.ts',
  'test/guard/client-assertion.test.ts',
  'test/guard/code-flow.test.ts',
  'test/guard/dpop-proof.test.ts',
  'test/guard/email-code.test.ts',
  'test/guard/nonce-and-replicas.test.ts',
  'test/guard/pep/replicas-and-limits.test.ts',
  'test/guard/pep/revoked-session.test.ts',
  'test/guard/rate-limit.test.ts',
  'test/guard/refresh-and-revoke.test.ts',
  'test/guard/refresh-families.test.ts',
  'test/guard/register.test.ts',
  'test/guard/shared-state.test.ts',
  'test/guard/token-exchange.test.ts',
  'test/guard/workload.test.ts',
  'test/jobs/jobs.test.ts',
  'test/ops-faults.test.ts',
  'test/ops-redis.test.ts',
  'test/store/read-replicas.test.ts',
  'test/subscriptions/at-least-once.test.ts',
];

module.exports = { STORE_FREE, REDIS_FREE, WITH_REDIS, SHARED_STATE };
