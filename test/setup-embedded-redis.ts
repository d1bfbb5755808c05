// The embedded store with Redis (DATA_DIR or in-memory PGlite, REDIS_URL): queues, replay caches
// and counters in Redis, resources in PGlite.
delete process.env.DATABASE_URL;
process.env.LOG_LEVEL ??= 'silent';
