// PostgreSQL without Redis, a supported deployment: shared guard state, queues and counters in PostgreSQL.
delete process.env.REDIS_URL;
