import { AsyncLocalStorage } from 'node:async_hooks';
import type { ClientPrincipal } from '../core/principal';
import type { ClientDirectory } from '../auth/clients';
import type { Database } from '../db/database';
import type { FhirService } from '../fhir/service';
import { ApiError } from '../core/errors';
import type { BackgroundWorker } from '../jobs';
import type { Logger } from '../log';
import { BULK_EXPORT_CHANNEL, MAX_ATTEMPTS, type BulkExports, type ClaimedTask } from './jobs';

export interface BulkExportWorker extends BackgroundWorker {
  /** Look for jobs now rather than at the next poll. */
  wake(): void;
  /** Resolves when this process has run every task it could claim (tests: no polling, no sleeps). */
  drain(): Promise<void>;
}

/**
 * The caller as it is now: the client must still be active, and the job keeps only the scopes (and all-patients
 * access) the client still has. Undefined when the client was revoked or moved to another organisation.
 */
async function currentPrincipal(clients: ClientDirectory, stored: ClientPrincipal): Promise<ClientPrincipal | undefined> {
  const client = await clients.active(stored.clientId);
  if (!client || client.organizationId !== stored.organizationId) return undefined;
  return { ...stored, scopes: stored.scopes.filter((s) => (client.scopes as string[]).includes(s)), allPatients: !!stored.allPatients && client.allPatients, facilityId: client.facilityId };
}

/**
 * Runs bulk exports in every process (docs/fhir.md "Bulk Data export"): up to `concurrency` tasks (one resource type of
 * an export) at once, each claimed under a lease and written one part per transaction, so a task whose process dies
 * is resumed by another after the lease, from its last committed part. Woken by a kick-off's NOTIFY (any process);
 * polls for leases run out.
 */
export function createBulkExportWorker(deps: { exports: BulkExports; fhir: FhirService; clients: ClientDirectory; db: Database; log: Logger }): BulkExportWorker {
  const { exports, log } = deps;
  const slots = new Set<Promise<void>>();
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let listening: Promise<(() => Promise<void>) | undefined> | undefined;

  /** The audit record of each export this process found complete. */
  const complete = async () => {
    for (const job of await exports.completeFinished()) {
      log.info('bulk export completed', { job_id: job.id, client_id: job.principal.clientId });
      await deps.fhir.repository({ principal: job.principal, channel: 'fhir', operation: 'bulkExport', requestId: `bulk-export-${job.id}` }).audit({
        operation: 'bulkExport',
        action: 'R',
        outcome: 'success',
        outcomeDescription: `bulk export ${job.id} completed: ${job.exported} resource(s) in ${job.files} file(s)`,
      });
    }
  };

  const run = async (task: ClaimedTask) => {
    const fields = { job_id: task.jobId, type: task.type, client_id: task.principal.clientId, attempt: task.attempts };
    if (task.attempts > MAX_ATTEMPTS) return exports.fail(task, `The export of ${task.type} was interrupted ${MAX_ATTEMPTS} times; start the export again`);
    const principal = await currentPrincipal(deps.clients, task.principal);
    if (!principal) return exports.fail(task, 'The client that asked for this export was revoked');
    const repo = deps.fhir.repository({ principal, channel: 'fhir', operation: 'bulkExport', requestId: `bulk-export-${task.jobId}`, purpose: task.purpose });
    log.debug('bulk export task claimed', fields);
    try {
      for (;;) {
        if (stopping) return await exports.release(task);
        const outcome = await exports.step(task, repo);
        if (outcome === 'done') await complete();
        if (outcome !== 'more') return;
      }
    } catch (err) {
      // A refusal or a bad filter will not change on retry (a scope since removed): fail now.
      if (err instanceof ApiError && err.status < 500) return exports.fail(task, err.message);
      log.error('bulk export step failed', { ...fields, error: err instanceof Error ? err.message : String(err) });
      // Claimed again after the lease (here or elsewhere), up to MAX_ATTEMPTS claims in all.
    }
  };

  const slot = async () => {
    while (!stopping) {
      const task = await exports.claim();
      if (!task) return complete(); // also an export whose last writer died between its last file and completing it
      await run(task);
    }
  };

  // The worker's own async context: a wake-up from inside a request must not lend it the request's transaction.
  const inWorkerContext = AsyncLocalStorage.snapshot();
  function wake() {
    if (stopping) return;
    inWorkerContext(() => {
      // Read at each wake: an operator (or a test) may change it while the process runs.
      while (slots.size < exports.settings.concurrency) {
        const s: Promise<void> = slot()
          .catch((err) => log.error('bulk export claim failed', { error: String(err) }))
          .finally(() => slots.delete(s));
        slots.add(s);
      }
    });
  }

  return {
    name: 'bulk-export',
    wake,
    async drain() {
      wake();
      while (slots.size) await Promise.all([...slots]);
    },
    start() {
      timer = setInterval(wake, exports.settings.pollIntervalMs);
      timer.unref();
      listening = deps.db.listen(BULK_EXPORT_CHANNEL, { notify: wake, ready: wake }).catch((err) => {
        log.error('bulk export listener not started', { error: String(err) });
        return undefined;
      });
      wake();
    },
    /** Finishes the step in progress and gives each task back, so another process resumes it at once. */
    async stop() {
      stopping = true;
      clearInterval(timer);
      await Promise.allSettled([...slots]);
      await (await listening)?.();
    },
  };
}
