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
  // The client libraries' surface against the OpenAPI document: no server either. Among the clients' files (a worker
  // of their own) it spent the first 20 s of a run importing the service, a third of the workers while little else ran.
  'clients/conformance/test/surface.test.ts',
];

// The integration tier: tests that start the service or open a database. Each runs once, on the PostgreSQL server
// (DATABASE_URL or 127.0.0.1:5432): the production database, and the faster one to test on (the embedded database
// boots in WebAssembly in every server process and command a test starts, seconds each).
const integration = ['test/**/*.test.ts'];

// These run on the embedded database too (PGlite, what `npm install && npm start` uses): the tests of what the two
// databases could do differently. The store's SQL and transactions (one connection on PGlite: writes queue, locks and
// SKIP LOCKED meet no other session), the policy's SQL through every door, the records' reads, partitions and
// retention, the outbox and job queues and their wake-ups (NOTIFY on PostgreSQL, in process on PGlite), concurrent
// registrations, import, and the embedded database itself. A test about HTTP shapes, tokens, maps, commands or pages
// is the same on both and runs once.
const onBothDatabases = [
  'test/database.test.ts',
  'test/fhir-crud.test.ts',
  'test/fhir-search.test.ts',
  'test/fhir-paging.test.ts',
  'test/fhir-patch.test.ts',
  'test/fhir-bundle.test.ts',
  'test/fhir-integrity.test.ts',
  'test/fhir-import.test.ts',
  'test/records.test.ts',
  'test/policy-doors.test.ts',
  'test/consent.test.ts',
  'test/audit.test.ts',
  'test/retention.test.ts',
  'test/webhooks-delivery.test.ts',
  'test/fhir-subscriptions.test.ts',
  'test/bulk-export.test.ts',
  'test/patients.test.ts',
  'test/bridge-sync.test.ts',
  'test/inventory.test.ts',
  'test/terminology-search.test.ts',
  'test/terminology-maps.test.ts',
];
// Only on the embedded database: its files, its memory, the commands that reach it through a running service.
const embeddedOnly = ['test/embedded-database.test.ts'];

const timeouts = { testTimeout: 60_000, hookTimeout: 120_000 };
// The integration files of a worker share one module graph too (isolate: false): each file starts its own servers
// on databases of its own, and the process-wide things they share are read-only (the FHIR definitions, the compiled
// maps of a directory's version) or keyed per service; a file would otherwise import the service and index the FHIR
// definitions again, some 2.5 s of CPU each.
const shared = { isolate: false };
// `npm run build` once for the run: the `pont` processes the integration tests start run the compiled build
// (test/global-build.ts).
const globalSetup = ['test/global-build.ts'];

export default defineConfig({
  test: {
    // One more than the 2-core CI machine's cores: the integration tests wait on PostgreSQL, child processes and
    // timeouts, and a third file runs meanwhile. The whole `npm test`, 2 and 3 in turn on a quiet day (stop 61):
    // 474 → 422 s and 431 → 416 s; on a day the host ran ~1.8× slower (stop 59), 850 → 874 s; 12 integration files
    // alone (stop 44), 192 → 207 s.
    maxWorkers: 3,
    projects: [
      // Seconds each alone (the FHIR definitions, every map compiled); beside the integration tests on two cores, the
      // default 5 s is not enough for the slowest of them.
      // One module graph for all the unit files (isolate: false): they keep no state between files (no mocks, stubbed
      // globals or environment, fake timers); 19 s instead of 50 s on the shared 2-core machine.
      { test: { name: 'unit', include: unit, isolate: false, testTimeout: 30_000 } },
      {
        test: {
          name: 'postgres',
          include: integration,
          exclude: [...configDefaults.exclude, ...unit, ...embeddedOnly],
          env: { PONT_TEST_DB: 'postgres' },
          // Its scratch databases are dropped together when the run ends (test/global-databases.ts).
          globalSetup: [...globalSetup, 'test/global-databases.ts'],
          ...timeouts,
          ...shared,
        },
      },
      { test: { name: 'pglite', include: [...onBothDatabases, ...embeddedOnly], env: { PONT_TEST_DB: 'pglite' }, globalSetup, ...timeouts, ...shared } },
      // The client libraries, once (each starts its own conformance server: clients/conformance/README.md).
      { test: { name: 'clients', include: ['clients/*/test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...unit], testTimeout: 120_000, hookTimeout: 120_000 } },
    ],
  },
});
