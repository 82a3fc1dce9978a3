import { withDatabase } from '../db/command';
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
