import { defineConfig } from 'vitest/config';

// The whole suite runs twice: on embedded PGlite and on the PostgreSQL server (DATABASE_URL or 127.0.0.1:5432).
const shared = { include: ['test/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 120_000 };

export default defineConfig({
  test: {
    maxWorkers: 2,
    projects: [
      { test: { ...shared, name: 'pglite', env: { PONT_TEST_DB: 'pglite' } } },
      { test: { ...shared, name: 'postgres', env: { PONT_TEST_DB: 'postgres' } } },
      // The client libraries, once (each starts its own server on the embedded database).
      { test: { name: 'clients', include: ['clients/*/test/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 120_000 } },
    ],
  },
});
