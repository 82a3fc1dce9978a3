import type { Config } from '../config';
import type { Database } from '../db/database';
import { claimDueNotices } from './record';
import type { Logger } from '../log';
import { periodicJob, type BackgroundWorker } from '../jobs';
import { recordEvents, type NewEvent } from '../events/outbox';
import { healthIdsByPatient } from '../healthid/registry';

/** How often each process looks for due notices (a notice fires at most this late). */
export const CONSENT_NOTICE_INTERVAL_MS = 2_000;
/** Notices one claim takes; the rest wait for the next run (or another process). */
const BATCH = 100;

/** The event of each kind of notice. */
const EVENT_OF = { expired: { type: 'consent.expired' }, erase_due: { type: 'consent.erase_due' } } as const;


/**
 * Fires the consent notices that are due by `now` (consent_notices, kept by the consent index, src/consents/record.ts):
 * `consent.expired` at a consent's expires_at, `consent.erase_due` at its erase_at, each once, to the organisation it is
 * granted to and to those holding the patient's data (src/webhooks/entitlement.ts), with the artefact's id (the consent's).
 * The claim (FOR UPDATE SKIP LOCKED), the events and the mark that they fired are one transaction: any number of
 * processes run it side by side and each notice fires exactly once. Returns how many fired.
 */
export async function fireDueNotices(db: Database, environment: Config['environment'], now: number): Promise<number> {
  return db.transaction(async (tx) => {
    const at = new Date(now).toISOString();
    const rows = await claimDueNotices(tx, at, BATCH);
    if (!rows.length) return 0;
    const healthIds = await healthIdsByPatient(tx, [...new Set(rows.map((r) => r.patient_id))]);
    const events: NewEvent[] = rows.map((r) => ({
      type: EVENT_OF[r.kind].type,
      organizationId: r.organization_id,
      patientId: r.patient_id,
      environment,
      data: {
        consent_id: r.consent_id,
        artefact_id: r.consent_id,
        organization_id: r.organization_id,
        health_id: healthIds.get(r.patient_id) ?? null,
        status: r.kind === 'expired' ? 'expired' : r.status === 'active' ? 'active' : 'revoked',
        [r.kind === 'expired' ? 'expires_at' : 'erase_at']: new Date(r.due_at).toISOString(),
      },
    }));
    await recordEvents(tx, events);
    return rows.length;
  });
}

/** The job that fires due consent notices in every process, on the service's clock (`now`, which tests move). */
export function consentNoticeWorker(db: Database, config: Pick<Config, 'environment'>, log: Logger, now: () => number): BackgroundWorker {
  return periodicJob(
    'consent-notices',
    CONSENT_NOTICE_INTERVAL_MS,
    async () => {
      // Until a run takes fewer than a batch: a backlog (a restart after downtime) drains at once.
      while ((await fireDueNotices(db, config.environment, now())) === BATCH);
    },
    log,
  );
}

/** How often each process drops the fetch counts of windows long over (consent_fetches). */
export const CONSENT_FETCHES_JANITOR_MS = 3_600_000;

/**
 * Drops the fetch counts and keys (frequency, src/policy readFacts) of windows that ended: every window is at most a year long,
 * so one that began more than a year and a day ago counts nothing any more.
 */
export function consentFetchesJanitor(db: Database, log: Logger): BackgroundWorker {
  return periodicJob('consent-fetches-janitor', CONSENT_FETCHES_JANITOR_MS, async () => {
    await db.query("DELETE FROM consent_fetches WHERE window_start < now() - interval '1 year 1 day'");
    await db.query("DELETE FROM consent_fetch_keys WHERE window_start < now() - interval '1 year 1 day'");
  }, log);
}
