import { configDefaults, defineConfig } from 'vitest/config';

// The unit tier: tests that start no server and open no database (rules, parsing, tables, static checks of the
// tree), run once and alone by `npm run test:unit`, in seconds. New ones are named *.unit.test.ts, in test/ or beside
// the code in src/; the older ones that qualify are listed by name.
const unit = [
  'test/**/*.unit.test.ts',
  'src/**/*.unit.test.ts',
  'test/architecture.test.ts',
  'test/dependencies.test.ts',
  'test/destination.test.ts',
  'test/fhir-indexer.test.ts',
  'test/healthid.test.ts',
  'test/smart-scopes.test.ts',
  'test/webhooks-config.test.ts',
];

// The integration tier runs twice: on embedded PGlite and on the PostgreSQL server (DATABASE_URL or 127.0.0.1:5432).
const shared = { include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...unit], testTimeout: 60_000, hookTimeout: 120_000 };

export default defineConfig({
  test: {
    maxWorkers: 2,
    projects: [
      { test: { name: 'unit', include: unit } },
      { test: { ...shared, name: 'pglite', env: { PONT_TEST_DB: 'pglite' } } },
      { test: { ...shared, name: 'postgres', env: { PONT_TEST_DB: 'postgres' } } },
      // The client libraries, once (each starts its own server on the embedded database).
      { test: { name: 'clients', include: ['clients/*/test/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 120_000 } },
    ],
  },
});
