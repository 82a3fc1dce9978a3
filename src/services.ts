import type { Config } from './config';
import type { Database } from './db/database';
import type { Logger } from './log';
import { FhirService } from './fhir/service';
import { createDeliveryWorker } from './webhooks/worker';
import { createIdempotencyJanitor } from './http/idempotency';
import { createAccessControl, type Access } from './auth/access';
import { loadMappings, type MappingSet } from './mapping/index';
import type { BackgroundWorker } from './jobs';
import { bloodStockClock } from './inventory/blood';

/** Everything a route needs, built once per process. */
export interface Services {
  config: Config;
  db: Database;
  log: Logger;
  /** The FHIR repositories: every read and write of clinical data goes through one (src/fhir/repository.ts). */
  fhir: FhirService;
  access: Access;
  /** The compiled mapping files (Connect shape <-> FHIR resource). */
  mappings: MappingSet;
  workers: BackgroundWorker[];
}

/** How often the audit trail's materialiser looks for new rows to turn into AuditEvents (src/audit/trail.ts). */
const AUDIT_MATERIALIZE_MS = 250;

export async function createServices(config: Config, db: Database, log: Logger): Promise<Services> {
  // First, before slower set-up: a bad map stops the start with its file:line:column (MappingError).
  const mappings = loadMappings(config.mappingsDir);
  const fhir = new FhirService(db, config, mappings);
  const services: Services = {
    config,
    db,
    log,
    fhir,
    access: await createAccessControl({ config, db }),
    mappings,
    workers: [
      createDeliveryWorker({ config, db, log }),
      createIdempotencyJanitor(db, config.idempotencyTtlMs, log),
      fhir.auditTrail.worker(AUDIT_MATERIALIZE_MS, log),
      bloodStockClock(db, log),
    ],
  };
  return services;
}
