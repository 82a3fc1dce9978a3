import { hostname } from 'node:os';
import { withDatabase } from '../db/command';
import type { Database } from '../db/database';
import { CLAIM_MS, claimJob, jobHolder, releaseJob, RetentionFailed, runRetention, type PurgeById } from './job';
import { UsageError } from '../cli-args';
import { loadConfig } from '../config';
import { FHIR_BASE_PATH } from '../fhir/service';
import { archiveMonth, ArchiveError, monthDirectory, restoreMonth, verifyArchive } from './audit-archive';
import { ensurePartitions, monthPartitions, PARTITIONED } from './partitions';
import { isMonth, monthRange, type Month } from '../core/period';

function checkedMonth(text: string): Month {
  if (!isMonth(text)) throw new UsageError(`--month must be a month as YYYY-MM (e.g. 2025-01), not "${text}"`);
  return text;
}

/** AUDIT_ARCHIVE_DIR, or undefined with the reason printed. */
function archiveDir(): string | undefined {
  const dir = loadConfig().retention.auditArchiveDir;
  if (!dir) console.error('AUDIT_ARCHIVE_DIR is not set: set the directory the audit trail is archived in');
  return dir;
}

/**
 * `pont audit archive --month YYYY-MM`: writes (or verifies) the month's archive and prints its manifest as JSON.
 * It drops nothing: the retention job drops a month once it is past PONT_RETENTION_AUDIT.
 */
export async function archiveCommand(monthText: string, now = new Date()): Promise<number> {
  const month = checkedMonth(monthText);
  const dir = archiveDir();
  if (!dir) return 1;
  if (monthRange(month).to > now) {
    console.error(`${month} has not ended: only a past month can be archived`);
    return 1;
  }
  try {
    const manifest = await withDatabase(async (db) => {
      await ensurePartitions(db, PARTITIONED.audit, now); // the month's rows may still wait in the default partition
      const partition = (await monthPartitions(db, PARTITIONED.audit)).find((p) => p.month === month);
      if (partition) return archiveMonth(db, dir, month, partition.name, now);
      const archived = await verifyArchive(dir, month);
      if (!archived) throw new ArchiveError(`no audit rows of ${month} in the database, and no archive of it in ${monthDirectory(dir, month)}`);
      return archived;
    });
    console.log(JSON.stringify({ directory: monthDirectory(dir, month), ...manifest }, null, 2));
    return 0;
  } catch (err) {
    if (!(err instanceof ArchiveError)) throw err;
    console.error(err.message);
    return 1;
  }
}

/**
 * `pont audit restore --month YYYY-MM`: verifies the month's archive and brings its AuditEvents back into the FHIR
 * store (searchable as AuditEvent), for PONT_AUDIT_RESTORE_HOLD. Prints what it did as JSON.
 */
export async function restoreCommand(monthText: string, now = new Date()): Promise<number> {
  const month = checkedMonth(monthText);
  const dir = archiveDir();
  if (!dir) return 1;
  const config = loadConfig();
  try {
    const { manifest, restored } = await withDatabase((db) => restoreMonth(db, `${config.publicUrl}${FHIR_BASE_PATH}`, dir, month, now));
    console.log(JSON.stringify({ month, rows: manifest.rows, restored, already_present: manifest.rows - restored }, null, 2));
    return 0;
  } catch (err) {
    if (!(err instanceof ArchiveError)) throw err;
    console.error(`Not restored: ${err.message}`);
    return 1;
  }
}

/**
 * `pont retention run [--dry-run]`: one retention pass now, as the service's hourly job runs it (partitions ahead;
 * then every kind past its PONT_RETENTION_* period: the audit trail's months archived, verified and dropped, events'
 * and attempts' months dropped, finished deliveries and replaced versions deleted). It claims the job's row first, so
 * it never runs beside a pass of the service or another command (exit code 1 if one is running). Prints the report
 * as JSON; `--dry-run` changes nothing and prints what the pass would do. `purgeFor` removes AuditEvents from the
 * store (FhirService.purgeById on that database).
 */
export async function retentionRunCommand(dryRun: boolean, purgeFor: (db: Database) => PurgeById, now = new Date()): Promise<number> {
  const config = loadConfig();
  return withDatabase(async (db) => {
    const holder = `pont retention run ${hostname()}:${process.pid}`;
    if (!dryRun && !(await claimJob(db, holder, now, new Date(now.getTime() + CLAIM_MS)))) {
      console.error(`Not run: another process is running retention now (${(await jobHolder(db, now)) ?? 'see job_claims'}); run it again once that pass has ended`);
      return 1;
    }
    const print = (report: object, extra: object = {}) => console.log(JSON.stringify({ dry_run: dryRun, at: now.toISOString(), ...report, ...extra }, null, 2));
    try {
      print(await runRetention(db, config.retention, now, purgeFor(db), { dryRun }));
      return 0;
    } catch (err) {
      if (!(err instanceof RetentionFailed)) throw err;
      print(err.report, { failures: err.errors.map((e) => (e instanceof Error ? e.message : String(e))) });
      console.error(err.message);
      return 1;
    } finally {
      if (!dryRun) await releaseJob(db, holder);
    }
  });
}
