import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Database, Queryable } from '../db/database';
import type { Logger } from '../log';
import { periodicJob, type BackgroundWorker } from '../jobs';
import { countVersionsReplacedBefore, forgetVersionsReplacedBefore } from '../fhir/store/purge';
import { archiveMonth, archivedFiles } from './audit-archive';
import { detachPartition, dropPartition, ensurePartitions, monthPartitions, PARTITIONED, type MonthPartition, type PartitionedTable } from './partitions';
import { cutoff, monthOf, monthRange, type Month } from '../core/period';

/** How long each kind of row is kept (config.ts, docs/operators.md "Retention"). Undefined: for ever. */
import type { RetentionConfig } from '../core/settings';

export type { RetentionConfig };

/**
 * Removes resources of a type from the store outright, with the rows the derived tables keep for them:
 * FhirService.purgeById, handed over at composition (src/services.ts).
 */
export type PurgeById = (sql: Queryable, type: string, ids: string[]) => Promise<number>;

/** Rows deleted per statement by the deletes by time: short transactions, whatever the backlog. */
const DELETE_BATCH = 1000;
/** How often the job runs, and how long a claim lasts (a process that dies holding it delays the next run only). */
const EVERY_MS = 3_600_000;
export const CLAIM_MS = 6 * EVERY_MS;
const JOB = 'retention';

/** What one run did. */
export interface RetentionReport {
  partitionsMade: Record<string, Month[]>;
  auditMonthsArchived: Month[];
  auditEventsDropped: number;
  restoredMonthsDropped: Month[];
  attemptMonthsDropped: Month[];
  deliveriesDeleted: number;
  eventMonthsDropped: Month[];
  /** Months of events past their period kept because a delivery still names one of their events. */
  eventMonthsHeld: Month[];
  versionsDeleted: number;
}

/** The month has ended before `before`: every row in it is older. */
const endedBefore = (month: Month, before: Date | undefined) => before !== undefined && monthRange(month).to <= before;

/** Repeats a batched delete until a batch comes back short. */
async function deleteInBatches(run: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await run();
    total += n;
    if (n < DELETE_BATCH) return total;
  }
}

/** Drops the AuditEvents of these audit_log ids from the FHIR store, a batch per transaction. */
async function dropAuditEvents(db: Database, purge: PurgeById, ids: string[]): Promise<number> {
  let dropped = 0;
  for (let i = 0; i < ids.length; i += DELETE_BATCH) {
    const batch = ids.slice(i, i + DELETE_BATCH);
    dropped += await db.transaction((tx) => purge(tx, 'AuditEvent', batch));
  }
  return dropped;
}

/**
 * A month of the audit trail past retention: archived and verified first (or an archive already verified), then
 * the partition is detached (no reader or the materialiser sees it any more), its AuditEvents dropped from the
 * FHIR store, the month recorded in audit_archives, and the partition dropped. Each step may be interrupted: the
 * next run finds the partition (attached or detached) and finishes.
 */
async function dropAuditMonth(db: Database, purge: PurgeById, dir: string, p: MonthPartition, now: Date): Promise<number> {
  const manifest = await archiveMonth(db, dir, p.month, p.name, now);
  await detachPartition(db, PARTITIONED.audit, p);
  let dropped = 0;
  // A batch of ids at a time, in key order (the primary key's index): a month may hold millions of rows.
  for (let after = '00000000-0000-0000-0000-000000000000'; ; ) {
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${p.name} WHERE id > $1 ORDER BY id LIMIT $2`, [after, DELETE_BATCH]);
    if (!rows.length) break;
    dropped += await dropAuditEvents(
      db,
      purge,
      rows.map((r) => r.id),
    );
    after = rows[rows.length - 1]!.id;
  }
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO audit_archives (month, rows, dropped_at) VALUES ($1, $2, $3) ON CONFLICT (month) DO UPDATE SET rows = EXCLUDED.rows, dropped_at = EXCLUDED.dropped_at`,
      [p.month, manifest.rows, now.toISOString()],
    );
    await tx.query(`DROP TABLE ${p.name}`);
  });
  return dropped;
}

/** Restored months whose hold has ended (and still past retention): their AuditEvents dropped again. */
async function dropRestoredMonths(db: Database, purge: PurgeById, config: RetentionConfig, auditCutoff: Date, now: Date, dryRun: boolean): Promise<Month[]> {
  const holdCutoff = cutoff(config.auditRestoreHold, now);
  if (!holdCutoff) return [];
  const { rows } = await db.query<{ month: Month }>('SELECT month FROM audit_archives WHERE restored_at <= $1 ORDER BY month', [holdCutoff.toISOString()]);
  const done: Month[] = [];
  for (const { month } of rows) {
    if (!endedBefore(month, auditCutoff)) continue;
    if (dryRun) {
      done.push(month);
      continue;
    }
    for await (const events of archivedFiles(config.auditArchiveDir!, month))
      await dropAuditEvents(
        db,
        purge,
        events.map((e) => e.id!),
      );
    await db.query('UPDATE audit_archives SET restored_at = NULL WHERE month = $1', [month]);
    done.push(month);
  }
  return done;
}

/** The months a partitioned table holds rows of: its month partitions, and the months of rows waiting in its default partition. */
async function monthsHeld(db: Database, t: PartitionedTable): Promise<MonthPartition[]> {
  const partitions = await monthPartitions(db, t);
  const { rows } = await db.query<{ month: Month }>(`SELECT DISTINCT to_char(${t.column} AT TIME ZONE 'UTC', 'YYYY-MM') AS month FROM ${t.table}_default`);
  const waiting = rows.filter((r) => !partitions.some((p) => p.month === r.month)).map((r) => ({ month: r.month, name: `${t.table}_default`, attached: true }));
  return [...partitions, ...waiting].sort((a, b) => a.month.localeCompare(b.month));
}

const countRows = async (db: Queryable, table: string, column: string, month: Month) => {
  const { from, to } = monthRange(month);
  const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${column} >= $1 AND ${column} < $2`, [from.toISOString(), to.toISOString()]);
  return Number(rows[0]!.n);
};

/** A run that failed in some step: what the other steps did, and why the failed ones failed. */
export class RetentionFailed extends AggregateError {
  constructor(
    failures: unknown[],
    readonly report: RetentionReport,
  ) {
    super(failures, `retention: ${failures.map((f) => (f instanceof Error ? f.message : String(f))).join('; ')}`);
  }
}

/**
 * One run of retention at `now`: partitions made ahead (and rows waiting in a default partition moved into their
 * month's), then each kind of row past its configured period removed, and nothing else. Safe to run again after an
 * interruption at any point. `purge` removes resources (AuditEvents) from the store (FhirService.purgeById).
 * `dryRun`: nothing is written, archived or dropped; the report says what the run would do (the same fields:
 * partitions it would make, months it would archive and drop, rows it would delete). A step that fails holds up
 * no other; the run then throws RetentionFailed, which carries the report of the rest.
 */
export async function runRetention(db: Database, config: RetentionConfig, now: Date, purge: PurgeById, { dryRun = false } = {}): Promise<RetentionReport> {
  const report: RetentionReport = {
    partitionsMade: {},
    auditMonthsArchived: [],
    auditEventsDropped: 0,
    restoredMonthsDropped: [],
    attemptMonthsDropped: [],
    deliveriesDeleted: 0,
    eventMonthsDropped: [],
    eventMonthsHeld: [],
    versionsDeleted: 0,
  };
  const auditCutoff = cutoff(config.audit, now);
  const deliveriesCutoff = cutoff(config.webhookDeliveries, now);
  const eventsCutoff = cutoff(config.events, now);
  const versionsCutoff = cutoff(config.resourceVersions, now);
  // Each step on its own: one that fails (an archive that cannot be written, a lock not had) holds up no other.
  const steps: Array<() => Promise<unknown>> = [
    async () => {
      for (const t of Object.values(PARTITIONED)) {
        if (!dryRun) report.partitionsMade[t.table] = await ensurePartitions(db, t, now);
        else {
          const existing = new Set((await monthPartitions(db, t)).map((p) => p.month));
          const wanted = [...new Set([...(await monthsHeld(db, t)).map((p) => p.month), ...[0, 1, 2].map((i) => monthOf(now, i))])].sort();
          report.partitionsMade[t.table] = wanted.filter((m) => !existing.has(m));
        }
      }
    },
    async () => {
      if (!auditCutoff) return;
      if (!config.auditArchiveDir) throw new Error('audit retention needs AUDIT_ARCHIVE_DIR'); // config.ts requires it
      for (const p of dryRun ? await monthsHeld(db, PARTITIONED.audit) : await monthPartitions(db, PARTITIONED.audit)) {
        if (!endedBefore(p.month, auditCutoff)) continue;
        report.auditEventsDropped += dryRun
          ? await countRows(db, p.name, PARTITIONED.audit.column, p.month)
          : await dropAuditMonth(db, purge, config.auditArchiveDir, p, now);
        report.auditMonthsArchived.push(p.month);
      }
      report.restoredMonthsDropped = await dropRestoredMonths(db, purge, config, auditCutoff, now, dryRun);
    },
    async () => {
      if (!deliveriesCutoff) return;
      for (const p of await monthPartitions(db, PARTITIONED.attempts)) {
        if (!endedBefore(p.month, deliveriesCutoff)) continue;
        if (!dryRun) await dropPartition(db, PARTITIONED.attempts, p);
        report.attemptMonthsDropped.push(p.month);
      }
      if (dryRun) {
        const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < $1`, [deliveriesCutoff.toISOString()]);
        report.deliveriesDeleted = Number(rows[0]!.n);
        return;
      }
      // A finished delivery (delivered, exhausted, cancelled) untouched since the cutoff goes with its attempts; a
      // pending one stays whatever its age.
      report.deliveriesDeleted = await deleteInBatches(() =>
        db.transaction(async (tx) => {
          const { rows } = await tx.query<{ id: string }>(
            `SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED`,
            [deliveriesCutoff.toISOString(), DELETE_BATCH],
          );
          const ids = rows.map((r) => r.id);
          await tx.query('DELETE FROM webhook_delivery_attempts WHERE delivery_id = ANY($1::text[])', [ids]);
          return (await tx.query('DELETE FROM webhook_deliveries WHERE id = ANY($1::text[])', [ids])).rowCount;
        }),
      );
    },
    async () => {
      if (!eventsCutoff) return;
      // An event stays while a delivery names it (its webhook history; a replay sends it again), and so does its
      // month: there is no foreign key to say so (migration 027). After the deliveries' step.
      for (const p of await monthPartitions(db, PARTITIONED.events)) {
        if (!endedBefore(p.month, eventsCutoff)) continue;
        const { from, to } = monthRange(p.month);
        const named = async (tx: Queryable) =>
          (await tx.query('SELECT 1 FROM webhook_deliveries WHERE event_created_at >= $1 AND event_created_at < $2 LIMIT 1', [from.toISOString(), to.toISOString()])).rows
            .length > 0;
        if (dryRun ? !(await named(db)) : await dropPartition(db, PARTITIONED.events, p, named)) report.eventMonthsDropped.push(p.month);
        else report.eventMonthsHeld.push(p.month);
      }
    },
    async () => {
      if (!versionsCutoff) return;
      report.versionsDeleted = dryRun
        ? await countVersionsReplacedBefore(db, versionsCutoff)
        : await deleteInBatches(() => forgetVersionsReplacedBefore(db, versionsCutoff, DELETE_BATCH));
    },
  ];
  const failures: unknown[] = [];
  for (const step of steps) await step().catch((err) => failures.push(err));
  if (failures.length) throw new RetentionFailed(failures, report);
  return report;
}

/**
 * Claims the job for `holder` until `until` unless another process holds an unexpired claim. A lease rather than a
 * lock held for the run: a run archives files for minutes, and no transaction (on PGlite: the one connection) stays
 * open that long.
 */
export async function claimJob(db: Database, holder: string, now: Date, until: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO job_claims (job, holder, expires_at) VALUES ($1, $2, $4)
     ON CONFLICT (job) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at WHERE job_claims.expires_at <= $3`,
    [JOB, holder, now.toISOString(), until.toISOString()],
  );
  return rowCount === 1;
}

export async function releaseJob(db: Database, holder: string): Promise<void> {
  await db.query('DELETE FROM job_claims WHERE job = $1 AND holder = $2', [JOB, holder]);
}

/**
 * Retention in the background of every process: a first pass `startDelayMs` after start (PONT_RETENTION_START_DELAY),
 * then hourly; one process at a time runs it (claimJob: `pont retention run` claims the same row). `purge`:
 * FhirService.purgeById. `now` is the clock (tests move it).
 */
export function createRetentionWorker(db: Database, config: RetentionConfig, log: Logger, purge: PurgeById, startDelayMs: number, now: () => Date = () => new Date()): BackgroundWorker {
  const holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  return periodicJob(
    'retention',
    EVERY_MS,
    async () => {
      const at = now();
      if (!(await claimJob(db, holder, at, new Date(at.getTime() + CLAIM_MS)))) return;
      try {
        const report = await runRetention(db, config, at, purge);
        log.info('retention run', { ...report });
      } finally {
        await releaseJob(db, holder);
      }
    },
    log,
    startDelayMs,
  );
}

/** Who holds the retention claim now (another process running a pass), if anyone. */
export async function jobHolder(db: Database, now: Date): Promise<string | undefined> {
  const { rows } = await db.query<{ holder: string }>('SELECT holder FROM job_claims WHERE job = $1 AND expires_at > $2', [JOB, now.toISOString()]);
  return rows[0]?.holder;
}
