import path from 'node:path';

/**
 * Keeps test/store-env.js true: records whether this test file reads DATABASE_URL or REDIS_URL
 * (from the test, its helpers or the code under test) and fails the file if a list there says it
 * does not. Runs in the `postgres` project, where both are set.
 */
const { STORE_FREE, REDIS_FREE } = require('./store-env') as { STORE_FREE: string[]; REDIS_FREE: string[] };

const WATCHED = new Set(['DATABASE_URL', 'REDIS_URL']);
const reads = new Set<string>();
const note = (key: string | symbol) => {
  if (typeof key === 'string' && WATCHED.has(key)) reads.add(key);
};
process.env = new Proxy(process.env, {
  get: (env, key) => (note(key), Reflect.get(env, key)),
  has: (env, key) => (note(key), Reflect.has(env, key)),
});

afterAll(() => {
  const file = path.relative(path.join(__dirname, '..'), expect.getState().testPath ?? '').split(path.sep).join('/');
  const unread = STORE_FREE.includes(file) ? ['DATABASE_URL', 'REDIS_URL'] : REDIS_FREE.includes(file) ? ['REDIS_URL'] : [];
  const wrong = unread.filter((key) => reads.has(key));
  if (wrong.length) {
    throw new Error(`${file} reads ${wrong.join(' and ')}, so it can run differently without it: take it out of its list in test/store-env.js`);
  }
});
