import type { Config } from './config';
import type { Database } from './db/database';
import type { Logger } from './log';
import { FhirService } from './fhir/service';
import { createDeliveryWorker } from './webhooks/worker';
import { eventDeliveries, listDeliveries } from './webhooks/deliveries';
import { listSubscriptions, unsubscribe } from './webhooks/subscriptions';
import { createIdempotencyJanitor } from './http/idempotency';
import { createAccessControl, type Access } from './auth/access';
import { loadMappings, type MappingSet } from './mapping/index';
import type { BackgroundWorker } from './jobs';
import { bloodStockClock } from './inventory/blood';

/**
 * Everything a route module or feature service needs, built once per process. No database handle: clinical and
 * facility data are reached through the request's repository (`repo`, which applies src/policy), Pont's own
 * tables through the service objects that own them (`access`, `webhooks`). test/dependencies.test.ts holds it.
 */
export interface Services {
  config: Config;
  log: Logger;
  /** The FHIR repositories: every read and write of clinical data goes through one (src/fhir/repository.ts). */
  fhir: FhirService;
  /** Authentication, rate limits, and the credential tables: clients, keys, agents, patient tokens. */
  access: Access;
  /** The webhook subscriptions and deliveries of an organisation. */
  webhooks: WebhookStore;
  /** The compiled mapping files (Connect shape <-> FHIR resource). */
  mappings: MappingSet;
  /** Readiness: resolves when the database answers, throws when it does not. */
  checkDatabase(): Promise<void>;
}

/** The composition root's view (server, CLI, tests): the services plus the database handle and the background workers. */
export interface Composition extends Services {
  db: Database;
  workers: BackgroundWorker[];
}

/** The webhook queries on the process's database, the caller's organisation given by the route. */
function webhookStore(db: Database) {
  const onDb =
    <A extends unknown[], R>(fn: (db: Database, ...args: A) => R) =>
    (...args: A) =>
      fn(db, ...args);
  return { listSubscriptions: onDb(listSubscriptions), unsubscribe: onDb(unsubscribe), listDeliveries: onDb(listDeliveries), eventDeliveries: onDb(eventDeliveries) };
}
export type WebhookStore = ReturnType<typeof webhookStore>;

/** How often the audit trail's materialiser looks for new rows to turn into AuditEvents (src/audit/trail.ts). */
const AUDIT_MATERIALIZE_MS = 250;

export async function createServices(config: Config, db: Database, log: Logger): Promise<Composition> {
  // First, before slower set-up: a bad map stops the start with its file:line:column (MappingError).
  const mappings = loadMappings(config.mappingsDir);
  const fhir = new FhirService(db, config, mappings);
  return {
    config,
    db,
    log,
    fhir,
    access: await createAccessControl({ config, db }),
    webhooks: webhookStore(db),
    mappings,
    checkDatabase: async () => void (await db.query('SELECT 1')),
    workers: [
      createDeliveryWorker({ config, db, log }),
      createIdempotencyJanitor(db, config.idempotencyTtlMs, log),
      fhir.auditTrail.worker(AUDIT_MATERIALIZE_MS, log),
      bloodStockClock(db, log),
    ],
  };
}
