import { mappingsDirectory, type Config } from './config';
import type { Database } from './db/database';
import type { Logger } from './log';
import type { Services } from './http/services';
import { FhirService } from './fhir/service';
import { consentIndex, consentRecordOf } from './consents/record';
import { ReadLimits } from './policy/read-limits';
import { paymentsTable } from './inventory/payments';
import { pharmacyStockTable } from './inventory/pharmacy';
import { createDeliveryWorker } from './webhooks/worker';
import { queueDeliveries } from './webhooks/deliveries';
import { onEventsRecorded } from './events/outbox';
import { webhookStore } from './webhooks/store';
import { createIdempotencyJanitor } from './http/idempotency';
import { createAccessControl } from './auth/access';
import { MappingHolder } from './mapping/holder';
import { searchProblem } from './fhir/search/parse';
import { fhirResourceProblem } from './fhir/validate';
import type { MappingSet } from './mapping/types';
import type { BackgroundWorker } from './jobs';
import { bloodStockClock, bloodUnitsTable } from './inventory/blood';
import { consentFetchesJanitor, consentNoticeWorker } from './consents/notices';
import { createAssertionJanitor } from './auth/assertions';
import { BulkExports } from './bulk/jobs';
import { createBulkExportWorker } from './bulk/worker';
import { periodicJob } from './jobs';
import { createRetentionWorker } from './retention/job';
import { TerminologyService } from './fhir/term/service';
import { FhirSubscriptions, useTopics } from './subscriptions/service';
import { loadTopics } from './subscriptions/topics';
import { createFanOutWorker } from './subscriptions/fanout';
import { defaultMappingsDir } from './mapping/index';

/** The composition root's view (server, CLI, tests): the services plus the database handle and the background workers. */
export interface Composition extends Services {
  db: Database;
  workers: BackgroundWorker[];
}

/** How often quiet rest-hook FHIR Subscriptions are looked for, to send them a heartbeat (the shortest period allowed is 10 s). */
const SUBSCRIPTION_HEARTBEAT_MS = 5_000;

/** How often expired bulk exports and their files are removed. */
const BULK_EXPORT_JANITOR_MS = 60_000;

/** How often the audit trail's materialiser looks for new rows to turn into AuditEvents (src/fhir/audit-trail.ts). */
const AUDIT_MATERIALIZE_MS = 250;

/** The FHIR service with what the features add to it: the derived tables each write keeps in step, and their rules. */
export function createFhirService(db: Database, config: Pick<Config, 'publicUrl' | 'environment' | 'matchKeySecret'>, mappings: MappingSet): FhirService {
  // Every recorded event queues its webhook deliveries in the same transaction (src/events/outbox.ts).
  onEventsRecorded(queueDeliveries);
  const readLimits = new ReadLimits(db);
  return new FhirService(db, config, mappings, {
    derived: [consentIndex(mappings, readLimits), bloodUnitsTable(mappings), paymentsTable(mappings), pharmacyStockTable(mappings)],
    readLimits,
    // A Consent counts as written by the organisation it is granted to: that organisation sees it.
    authorOf: (resource) => (resource.resourceType === 'Consent' ? consentRecordOf(mappings, resource)?.organization_id : undefined),
  });
}

/** The maps the service runs, compiled and checked: a bad map throws a MappingError naming file:line:column. */
export const loadServiceMappings = (config: Pick<Config, 'mappingsDir'>): MappingHolder => new MappingHolder(mappingsDirectory(config), { searchProblem, fhirProblem: fhirResourceProblem });

/** `mappings`: the maps already loaded (startPont loads them before it opens the database, so a bad map stops the start at once). */
export async function createServices(config: Config, db: Database, log: Logger, mappings = loadServiceMappings(config)): Promise<Composition> {
  const fhir = createFhirService(db, config, mappings);
  await fhir.readLimits.listen();
  const access = await createAccessControl({ config, db });
  const bulkExports = new BulkExports(db, config.bulkExport, log);
  // FHIR Subscriptions (src/subscriptions): the topics beside the maps; a write queues the changes that fire one, the fan-out worker numbers them.
  const topics = loadTopics(config.mappingsDir ?? defaultMappingsDir);
  useTopics(topics);
  const subscriptions = new FhirSubscriptions(
    db,
    { publicUrl: () => config.publicUrl, fhir, log, allowHttpLoopback: config.webhooks.allowHttpLoopback, secretKey: config.webhooks.secretKey, now: () => new Date(fhir.now()) },
    topics,
  );
  return {
    config,
    db,
    log,
    fhir,
    access,
    webhooks: webhookStore(db),
    mappings,
    checkDatabase: async () => void (await db.query('SELECT 1')),
    bulkExports,
    terminology: new TerminologyService(db, fhir.terminology, { timeoutMs: config.terminologyTimeoutMs }),
    subscriptions,
    workers: [
      createDeliveryWorker({ config, db, log, notifications: subscriptions }),
      createFanOutWorker(db, log),
      periodicJob('fhir-subscription-heartbeats', SUBSCRIPTION_HEARTBEAT_MS, () => subscriptions.queueHeartbeats().then(() => subscriptions.purge(config.retention.events)), log),
      createIdempotencyJanitor(db, config.idempotencyTtlMs, log),
      fhir.auditTrail.worker(AUDIT_MATERIALIZE_MS, log),
      bloodStockClock(db, log, () => fhir.now()),
      consentNoticeWorker(db, config, log, () => fhir.now()),
      consentFetchesJanitor(db, log),
      createAssertionJanitor(db, log),
      createBulkExportWorker({ exports: bulkExports, fhir, clients: access.clients, db, log }),
      periodicJob('bulk-export-janitor', BULK_EXPORT_JANITOR_MS, () => bulkExports.purgeExpired(), log),
      createRetentionWorker(db, config.retention, log, (sql, type, ids) => fhir.purgeById(sql, type, ids), config.retentionStartDelayMs),
    ],
  };
}
