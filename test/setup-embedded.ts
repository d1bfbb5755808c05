// The embedded defaults: no PostgreSQL, no Redis (jest.config.js runs this project beside the PostgreSQL one).
delete process.env.DATABASE_URL;
delete process.env.REDIS_URL;
