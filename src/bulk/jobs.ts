import { randomBytes } from 'node:crypto';
import type { ClientPrincipal } from '../core/principal';
import { sqlState, SqlState, type Database } from '../db/database';
import { primaryPositionAt, replicaAt } from '../db/replica';
import type { ExportPage, FhirRepository } from '../fhir/repository';
import type { QueryParams } from '../fhir/search/parse';
import { consentChangedSince, UNPLACED_PATIENT } from '../policy/index';
import { sql } from '../db/sql';
import { ApiError, ErrorCode } from '../core/errors';
import type { BulkExportSettings } from '../core/settings';
import type { Readable } from 'node:stream';
import type { Queryable } from '../db/database';
import { ExportFiles, type PartWriter } from './files';
import type { Logger } from '../log';

export type { BulkExportSettings } from '../core/settings';

/** A second export while one is running: 429, retry after this many seconds. */
export const BUSY_RETRY_AFTER_SECONDS = 30;
/** Claims of a task (restarts after a claimer died, or errors) before its export fails visibly. */
export const MAX_ATTEMPTS = 5;
/** NOTIFY channel: an export was queued, workers of every process look now. */
export const BULK_EXPORT_CHANNEL = 'pont_bulk_exports';
/** A job directory with no job row is removed by the janitor once untouched this long (src/bulk/files.ts sweep). */
const ORPHAN_MIN_AGE_MS = 3600_000;

export type ExportLevel = 'system' | 'patient' | 'group';

/** Who may see a job: the client that asked, of the organisation it belonged to then. */
export interface ExportOwner {
  clientId: string;
  organizationId: string;
}

export interface NewExport {
  principal: ClientPrincipal;
  request: string;
  level: ExportLevel;
  /** Patient ids: the Group's members, or the `patient` parameter. */
  members?: string[];
  /** The types to export (one task each): those asked for that have anything stored. */
  types: string[];
  since?: string;
  typeFilters: Array<{ type: string; text: string }>;
  /** The purpose of use the kick-off stated (X-Purpose-Of-Use): the export reads under it. */
  purpose?: string;
}

export interface ExportJob {
  id: string;
  status: 'running' | 'completed' | 'failed';
  request: string;
  transactionTime: string;
  error: string | null;
  expiresAt: string | null;
  exported: number;
  /** The resource types it exports (one task each). */
  types: string[];
  typesDone: number;
}

export interface ExportFile {
  part: number;
  type: string;
  count: number;
}

/** A task (one type of one export) this process holds the lease of: the worker's view. */
export interface ClaimedTask {
  jobId: string;
  type: string;
  leaseToken: string;
  attempts: number;
  principal: ClientPrincipal;
  level: ExportLevel;
  members: string[] | null;
  since: string | null;
  typeFilters: string[];
  transactionTime: string;
  /** The purpose of use its kick-off stated: its reads are made under it (the repository's context). */
  purpose?: string;
  /** With a replica: the primary's WAL position once the task was claimed (after its kick-off), which the replica must have replayed to serve its pages. */
  primaryPosition?: string;
  /** The primary's clock at primaryPosition: a part read on the replica is as of then (its written_at, for openFile's consent check). */
  primaryPositionAt?: string;
  /** The mean size of the lines written so far (bytes with the newline): how many the next read asks for (readAhead). */
  meanLineBytes?: number;
}

interface JobRow {
  id: string;
  status: ExportJob['status'];
  request: string;
  transaction_time: Date | string;
  error: string | null;
  expires_at: Date | string | null;
  exported: string;
  types: string[];
  types_done: number;
}

const iso = (d: Date | string) => new Date(d).toISOString();

/** The `_typeFilter` criteria of one type, as search parameters. */
export function typeFilterQueries(texts: string[], type: string): QueryParams[] {
  return texts
    .filter((t) => t.startsWith(`${type}?`))
    .map((t) => {
      const query: QueryParams = {};
      for (const [k, v] of new URLSearchParams(t.slice(type.length + 1))) query[k] = query[k] === undefined ? v : ([] as string[]).concat(query[k]!, v);
      return query;
    });
}

/** How often a claim looks again whether the writes open at its export's kick-off have ended (they take milliseconds). */
const OPEN_WRITES_POLL_MS = 20;

/** Lines one read of a part asks for at most: the memory a writer holds (~1.5 MB of typical resources). */
export const MAX_READ_LINES = 1000;
/** The texts a read comes back as (bytes, about): small enough to stay young garbage in V8 (its large objects start at 128 KiB). */
const READ_TEXT_BYTES = 48 * 1024;
/** The first read of a type, before any line's size is known. */
const FIRST_READ_LINES = 100;

/**
 * How many lines the next read of a part asks for: what the part still takes, by count and, at the mean size of the
 * lines so far, by bytes (10% more, so that it still reaches the byte limit), at most MAX_READ_LINES. Lines read
 * past the byte limit are turned into text for nothing (read again for the next part): for ExplanationOfBenefits
 * (~6.4 kB each) a fixed read of 1,000 would waste up to ~6 MB per 8 MiB part.
 */
export function readAhead(remainingLines: number, remainingBytes: number, meanLineBytes: number | undefined): number {
  const bySize = meanLineBytes ? Math.ceil((remainingBytes / meanLineBytes) * 1.1) : FIRST_READ_LINES;
  return Math.max(1, Math.min(MAX_READ_LINES, remainingLines, bySize));
}

/**
 * The export jobs, their tasks and files (migration 023): what the routes ask (kick-off, status, files, cancel) and
 * what the worker does (claim a task, write one part at a time, complete, fail, release). Times come from `now`,
 * which tests move.
 */
export class BulkExports {
  private readonly output: ExportFiles;

  constructor(
    private readonly db: Database,
    readonly settings: BulkExportSettings,
    private readonly log: Logger,
    public now: () => number = Date.now,
  ) {
    this.output = new ExportFiles(settings.dir);
  }

  /**
   * Removes a job's files; when it cannot (a directory not writable), says so and lets the rows go all the same: a
   * job that cannot be cancelled or failed would block its client's next export for good. The janitor (`purgeExpired`)
   * tries again.
   */
  private async removeFiles(jobId: string): Promise<void> {
    const err = await this.output.remove(jobId);
    if (err) this.log.warn('bulk export files not removed: the janitor tries again', { job_id: jobId, dir: this.settings.dir, error: err.message });
  }

  private nowIso(plusMs = 0): string {
    return new Date(this.now() + plusMs).toISOString();
  }

  /** Queues an export (a task per type); 429 while the client has one running. Returns the job id. */
  async create(input: NewExport): Promise<{ id: string; transactionTime: string }> {
    const id = randomBytes(16).toString('hex');
    const { tokenId: _token, tokenExpiresAt: _expires, ...principal } = input.principal;
    let transactionTime: string;
    try {
      transactionTime = await this.db.transaction(async (tx) => {
        // transactionTime on the database's clock (the writes' lastUpdated), a millisecond before this statement, and
        // the transactions open now: claim() waits for them, so every write dated up to transactionTime is read
        // (migration 028).
        const { rows } = await tx.query<{ transaction_time: Date | string }>(
          `INSERT INTO bulk_export_jobs (id, client_id, organization_id, principal, request, level, members, since, type_filters, transaction_time, open_at_kickoff, status, created_at, purpose)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, date_trunc('milliseconds', statement_timestamp()) - interval '1 millisecond', pg_current_snapshot(), 'running', $10, $11)
           RETURNING transaction_time`,
          [id, principal.clientId, principal.organizationId, JSON.stringify(principal), input.request, input.level, input.members ?? null, input.since ?? null,
            input.typeFilters.map((f) => f.text), this.nowIso(), input.purpose ?? null],
        );
        await tx.query('INSERT INTO bulk_export_tasks (job_id, resource_type) SELECT $1, unnest($2::text[])', [id, input.types]);
        await tx.query('SELECT pg_notify($1, $2)', [BULK_EXPORT_CHANNEL, id]);
        return iso(rows[0]!.transaction_time);
      });
    } catch (err) {
      if (sqlState(err) !== SqlState.uniqueViolation) throw err;
      throw new ApiError(429, ErrorCode.rateLimited, 'This client already has a bulk export in progress: wait for it to finish, or cancel it (DELETE its status URL)', {
        headers: { 'Retry-After': String(BUSY_RETRY_AFTER_SECONDS) },
      });
    }
    return { id, transactionTime };
  }

  /**
   * How many of the transactions open at the job's kick-off are still open (migration 028). A snapshot lists the
   * open transactions of every database on the server: only those of a session on this database can write here
   * (another database's long transaction must not hold the export back).
   */
  async openAtKickOff(jobId: string): Promise<number> {
    const { rows } = await this.db.query<{ open: number }>(
      `SELECT count(*)::int AS open FROM bulk_export_jobs j, pg_snapshot_xip(j.open_at_kickoff) x
       WHERE j.id = $1 AND pg_xact_status(x) = 'in progress'
         AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = current_database() AND a.backend_xid = x::xid)`,
      [jobId],
    );
    return rows[0]?.open ?? 0;
  }

  /** The job, when `owner` asked for it and it has not expired (a cancelled job is deleted). */
  async find(id: string, owner: ExportOwner): Promise<ExportJob | undefined> {
    const { rows } = await this.db.query<JobRow>(
      `SELECT j.id, j.status, j.request, j.transaction_time, j.error, j.expires_at, COALESCE(sum(t.exported), 0)::text AS exported,
              array_remove(array_agg(t.resource_type ORDER BY t.resource_type), NULL) AS types, count(t.resource_type) FILTER (WHERE t.done)::int AS types_done
       FROM bulk_export_jobs j LEFT JOIN bulk_export_tasks t ON t.job_id = j.id
       WHERE j.id = $1 AND j.client_id = $2 AND j.organization_id = $3 AND (j.expires_at IS NULL OR j.expires_at > $4)
       GROUP BY j.id`,
      [id, owner.clientId, owner.organizationId, this.nowIso()],
    );
    const r = rows[0];
    return (
      r && {
        id: r.id,
        status: r.status,
        request: r.request,
        transactionTime: iso(r.transaction_time),
        error: r.error,
        expiresAt: r.expires_at && iso(r.expires_at),
        exported: Number(r.exported),
        types: r.types,
        typesDone: r.types_done,
      }
    );
  }

  /** The files of a completed job, in order. */
  async files(id: string): Promise<ExportFile[]> {
    const { rows } = await this.db.query<{ part: string; resource_type: string; count: number }>(
      'SELECT part::text AS part, resource_type, count FROM bulk_export_parts WHERE job_id = $1 ORDER BY resource_type, part',
      [id],
    );
    return rows.map((r) => ({ part: Number(r.part), type: r.resource_type, count: r.count }));
  }

  /**
   * One file of `job` (found for its owner: `find`), streamed from the export directory (src/bulk/files.ts) a chunk
   * at a time: a download holds one chunk in memory, whatever its size. Undefined when it has no such file (not
   * completed, no such part); 'withheld' once a consent of the organisation about a patient in the file changed
   * (withdrawn, narrowed, renewed) or ended after the file was written: what it holds may no longer be the
   * organisation's to read, so it exports again. 'missing': the row is here and the file is not (a directory not
   * shared by every process, or removed by hand): an operator's error, told as such.
   */
  async openFile(job: ExportJob, part: number, owner: ExportOwner): Promise<{ bytes: number; body: Readable } | 'withheld' | 'missing' | undefined> {
    if (job.status !== 'completed') return undefined;
    const withheld = consentChangedSince(sql`${owner.organizationId}`, sql`f.patients`, sql`f.snapshot`, sql`f.written_at`, sql`${this.nowIso()}::timestamptz`);
    const { text, values } = sql`SELECT f.bytes::text AS bytes, ${withheld} AS withheld FROM bulk_export_parts f WHERE f.job_id = ${job.id} AND f.part = ${part}`.render();
    const { rows } = await this.db.query<{ bytes: string; withheld: boolean }>(text, values);
    if (!rows[0]) return undefined;
    if (rows[0].withheld) return 'withheld';
    const bytes = Number(rows[0].bytes);
    const body = await this.output.read(job.id, part, bytes);
    return body === 'missing' ? body : { bytes, body };
  }

  /** Cancels (running) or deletes (finished) the job, its tasks and files; false when `owner` has no such job. */
  async cancel(id: string, owner: ExportOwner): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      // A worker's step holds its task's row, and its job's row shared, until its part commits: the delete waits for
      // it (rather than deadlocking on the part's foreign key), and the worker's next step finds the job gone.
      const { rowCount } = await tx.query(
        `DELETE FROM bulk_export_jobs WHERE id = $1 AND client_id = $2 AND organization_id = $3 AND (expires_at IS NULL OR expires_at > $4)`,
        [id, owner.clientId, owner.organizationId, this.nowIso()],
      );
      // The files go before the rows commit: a crash in between leaves a job without files (never served whole),
      // not patient data on disk that nothing points to.
      if (rowCount) await this.removeFiles(id);
      return rowCount > 0;
    });
  }

  /**
   * Removes the jobs and files whose time is up, and the consent changes older than every file left (an hour's
   * margin: a change's time is its transaction's start, its commit may come later); returns how many jobs.
   */
  async purgeExpired(): Promise<number> {
    const purged = await this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string }>('DELETE FROM bulk_export_jobs WHERE expires_at <= $1 RETURNING id', [this.nowIso()]);
      for (const { id } of rows) await this.removeFiles(id);
      await tx.query(
        `DELETE FROM consent_changes WHERE changed_at < (SELECT COALESCE(min(written_at), $1::timestamptz) FROM bulk_export_parts) - interval '1 hour'`,
        [this.nowIso()],
      );
      return rows.length;
    });
    const { failed } = await this.output.sweep(
      async (ids) => new Set((await this.db.query<{ id: string }>('SELECT id FROM bulk_export_jobs WHERE id = ANY($1::text[])', [ids])).rows.map((r) => r.id)),
      ORPHAN_MIN_AGE_MS,
      this.now(),
    );
    if (failed.length) this.log.warn('bulk export files not removed: the janitor tries again', { dir: this.settings.dir, directories: failed.length, error: failed[0]!.message });
    return purged;
  }

  // ------------------------------------------------------------------ the worker's side

  /**
   * Claims the oldest task that nobody holds, or whose claimer's lease ran out (it died, or lost its database), for
   * `settings.leaseMs`. `FOR UPDATE SKIP LOCKED`: processes claim side by side without waiting on each other, and the
   * types of one export are written by several at once.
   */
  async claim(): Promise<ClaimedTask | undefined> {
    const leaseToken = randomBytes(12).toString('hex');
    const { rows } = await this.db.query<{
      job_id: string;
      resource_type: string;
      attempts: number;
      principal: ClientPrincipal;
      level: ExportLevel;
      members: string[] | null;
      since: Date | string | null;
      type_filters: string[];
      transaction_time: Date | string;
      purpose: string | null;
    }>(
      `WITH due AS (
         SELECT t.job_id, t.resource_type FROM bulk_export_tasks t JOIN bulk_export_jobs j ON j.id = t.job_id
         WHERE NOT t.done AND j.status = 'running' AND (t.lease_expires_at IS NULL OR t.lease_expires_at <= $1)
         ORDER BY j.created_at, t.resource_type LIMIT 1
         FOR UPDATE OF t SKIP LOCKED
       )
       UPDATE bulk_export_tasks t SET lease_token = $2, lease_expires_at = $3, attempts = t.attempts + 1
       FROM due, bulk_export_jobs j WHERE t.job_id = due.job_id AND t.resource_type = due.resource_type AND j.id = t.job_id
       RETURNING t.job_id, t.resource_type, t.attempts, j.principal, j.level, j.members, j.since, j.type_filters, j.transaction_time, j.purpose`,
      [this.nowIso(), leaseToken, this.nowIso(this.settings.leaseMs)],
    );
    const r = rows[0];
    if (!r) return undefined;
    // Nothing is read (and no replica position taken) before the writes open at the kick-off have ended. One still
    // open after half a lease (a session left in a transaction): the task goes back, not counted, for a later claim.
    const giveUpAt = this.now() + this.settings.leaseMs / 2;
    while (await this.openAtKickOff(r.job_id)) {
      if (this.now() >= giveUpAt) {
        await this.release({ jobId: r.job_id, type: r.resource_type, leaseToken });
        return undefined;
      }
      await new Promise((resolve) => setTimeout(resolve, OPEN_WRITES_POLL_MS));
    }
    const position = await primaryPositionAt(this.db);
    return {
      jobId: r.job_id,
      type: r.resource_type,
      leaseToken,
      attempts: r.attempts,
      principal: r.principal,
      level: r.level,
      members: r.members,
      since: r.since && iso(r.since),
      typeFilters: r.type_filters,
      transactionTime: iso(r.transaction_time),
      ...(r.purpose !== null && { purpose: r.purpose }),
      primaryPosition: position?.lsn,
      primaryPositionAt: position?.at,
    };
  }

  /**
   * Writes the task's next file: the next lines of its type that the caller may read, appended to the part's file
   * (writePart), then the part's row and the point to resume from, in one transaction under the lease. 'done': the
   * type is exported; 'lost': the lease is gone (cancelled, or taken over after it ran out), nothing was written.
   */
  async step(task: ClaimedTask, repo: FhirRepository): Promise<'more' | 'done' | 'lost'> {
    return repo.transaction(async (sql) => {
      const { rows } = await sql.query<{ after_rid: string; part: string }>(
        `SELECT t.after_rid::text AS after_rid, nextval(pg_get_serial_sequence('bulk_export_parts', 'part'))::text AS part
         FROM bulk_export_tasks t JOIN bulk_export_jobs j ON j.id = t.job_id
         WHERE t.job_id = $1 AND t.resource_type = $2 AND t.lease_token = $3 AND NOT t.done AND j.status = 'running'
         FOR UPDATE OF t FOR SHARE OF j`,
        [task.jobId, task.type, task.leaseToken],
      );
      if (!rows[0]) return 'lost';
      const part = rows[0].part;
      // AuditEvents are materialised by exportPageQuery in this transaction: not on any replica yet.
      const replica = task.type === 'AuditEvent' ? undefined : await replicaAt(this.db, task.primaryPosition);
      const reader = replica ?? sql;
      // Before any line is read: a consent change this snapshot does not see may be missing from the lines (openFile).
      const { rows: seen } = await reader.query<{ snapshot: string }>('SELECT pg_current_snapshot()::text AS snapshot');
      const file = await this.output.writer(task.jobId, part);
      try {
        const written = await this.writePart(task, repo, reader, rows[0].after_rid, file);
        if (written.lines === 0) await file.discard();
        else {
          // The file's patients and the snapshot it was read in, kept with it: a consent change about one of them that
          // the snapshot does not see withholds the file (openFile), as does one that ends after written_at (read on a
          // replica: as of the replica's position, not now).
          await sql.query(
            `INSERT INTO bulk_export_parts (job_id, part, resource_type, count, bytes, patients, snapshot, written_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7::pg_snapshot, COALESCE($8::timestamptz, now()))`,
            [task.jobId, part, task.type, written.lines, written.bytes, written.patients, seen[0]!.snapshot, replica ? task.primaryPositionAt : null],
          );
          const named = written.patients.slice(0, 50);
          const of = written.patients.length;
          await repo.audit({
            operation: 'bulkExport',
            action: 'R',
            outcome: 'success',
            outcomeDescription: `bulk export ${task.jobId}, file ${part}: ${written.lines} ${task.type} resource(s) of ${of} patient(s)${of > named.length ? `; first ${named.length} named` : ''}`,
            patient: { id: named[0] },
            otherPatients: named.slice(1),
            dataTypes: [task.type],
          }, { patients: written.patients, key: `bulk-export:${task.jobId}` });
        }
        await sql.query(
          `UPDATE bulk_export_tasks SET after_rid = $3::bigint, exported = exported + $4, done = $5,
             lease_token = CASE WHEN $5 THEN NULL ELSE lease_token END, lease_expires_at = CASE WHEN $5 THEN NULL ELSE $6::timestamptz END
           WHERE job_id = $1 AND resource_type = $2`,
          [task.jobId, task.type, written.afterRid, written.lines, !written.more, this.nowIso(this.settings.leaseMs)],
        );
        return written.more ? 'more' : 'done';
      } catch (err) {
        // Not to be committed: the file is nobody's (its part number is never used again).
        await file.discard();
        throw err;
      }
    });
  }

  /**
   * Appends to `file` the lines of the task's type after `afterRid` that the caller may read (FhirRepository
   * .exportPageQuery), read from `reader` at most MAX_READ_LINES at a time, up to `partResources` lines and
   * `partBytes` (at least one line: it may end past the limit); then syncs it. Returns where the next part resumes,
   * whether there may be more, and the patients the lines are about.
   */
  private async writePart(task: ClaimedTask, repo: FhirRepository, reader: Queryable, afterRid: string, file: PartWriter) {
    const { partResources, partBytes } = this.settings;
    const page: Omit<ExportPage, 'afterRid' | 'limit'> = {
      until: task.transactionTime,
      since: task.since ?? undefined,
      patients: task.level === 'system' ? undefined : (task.members ?? 'any'),
      typeFilters: typeFilterQueries(task.typeFilters, task.type),
    };
    let lines = 0;
    let bytes = 0;
    const patients = new Set<string>();
    while (lines < partResources && bytes < partBytes) {
      const limit = readAhead(partResources - lines, partBytes - bytes, task.meanLineBytes);
      const query = await repo.exportPageQuery(task.type, { ...page, afterRid, limit });
      const p = `$${query.values.length + 1}`;
      // The read comes back as a few texts, not a row per line: PostgreSQL joins the lines it reads, until the
      // part's byte limit (at least one), into runs of about READ_TEXT_BYTES, and this process writes each as it is.
      // A row per line cost this process ~30 µs a line (parsing, strings, collection), twice the database's. One text
      // per read (~1.5 MB) made large strings and buffers, collected with the old generation several times a second:
      // other clients' reads waited (p95 3x idle during an export; bench:bulk).
      const { rows } = await reader.query<{ body: string | null; kept: number; fetched: number; last_rid: string | null; bytes: string | null; patients: string | null }>(
        `SELECT string_agg(line, E'\\n' ORDER BY rid) FILTER (WHERE kept) AS body, count(*) FILTER (WHERE kept)::int AS kept, count(*)::int AS fetched,
                max(rid) FILTER (WHERE kept)::text AS last_rid, sum(octet_length(line) + 1) FILTER (WHERE kept)::text AS bytes,
                string_agg(patients, ' ') FILTER (WHERE kept AND patients <> '') AS patients
         FROM (SELECT rid, line, patients, before < ${p} AS kept, before / ${READ_TEXT_BYTES} AS run
               FROM (SELECT rid, line, patients, sum(octet_length(line) + 1) OVER (ORDER BY rid ROWS UNBOUNDED PRECEDING) - octet_length(line) - 1 AS before
                     FROM (${query.sql}) page) numbered) w
         GROUP BY run ORDER BY run`,
        [...query.values, partBytes - bytes],
      );
      const read = { fetched: 0, kept: 0 };
      for (const run of rows) {
        read.fetched += run.fetched;
        if (!run.kept) continue;
        await file.write(`${run.body}\n`);
        read.kept += run.kept;
        bytes += Number(run.bytes);
        afterRid = run.last_rid!;
        if (run.patients) for (const id of run.patients.split(' ')) patients.add(id);
      }
      if (read.kept) {
        lines += read.kept;
        task.meanLineBytes = bytes / lines;
      }
      // Fewer lines than asked for, each kept: the type has no more.
      if (read.fetched < limit && read.kept === read.fetched) return { lines, afterRid, more: false, ...(await this.closePart(file, lines, bytes, patients)) };
    }
    return { lines, afterRid, more: true, ...(await this.closePart(file, lines, bytes, patients)) };
  }

  private async closePart(file: PartWriter, lines: number, bytes: number, patients: Set<string>): Promise<{ bytes: number; patients: string[] }> {
    patients.delete(UNPLACED_PATIENT);
    const size = lines ? await file.finish() : 0;
    // The file must hold every byte read: a file cut short is never published as whole.
    if (size !== bytes) throw new Error(`bulk export part: ${bytes} bytes read, ${size} in the file`);
    return { bytes: size, patients: [...patients].sort() };
  }

  /**
   * Completes the running exports whose every type is written (the last task's claimer, or any worker afterwards if
   * that one died in between). Returns them, for the audit record of each.
   */
  async completeFinished(): Promise<Array<{ id: string; principal: ClientPrincipal; exported: number; files: number }>> {
    const { rows } = await this.db.query<{ id: string; principal: ClientPrincipal; exported: string; files: string }>(
      `UPDATE bulk_export_jobs j SET status = 'completed', finished_at = $1, expires_at = $2
       WHERE j.status = 'running' AND NOT EXISTS (SELECT 1 FROM bulk_export_tasks t WHERE t.job_id = j.id AND NOT t.done)
       RETURNING j.id, j.principal, (SELECT COALESCE(sum(exported), 0) FROM bulk_export_tasks t WHERE t.job_id = j.id)::text AS exported,
                 (SELECT count(*) FROM bulk_export_parts p WHERE p.job_id = j.id)::text AS files`,
      [this.nowIso(), this.nowIso(this.settings.ttlMs)],
    );
    return rows.map((r) => ({ id: r.id, principal: r.principal, exported: Number(r.exported), files: Number(r.files) }));
  }

  /** Ends the task's export with an error the status URL reports (its files go: never a manifest with files missing). */
  async fail(task: ClaimedTask, message: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query(
        `UPDATE bulk_export_jobs SET status = 'failed', error = $2, finished_at = $3, expires_at = $4 WHERE id = $1 AND status = 'running'`,
        [task.jobId, message.slice(0, 1000), this.nowIso(), this.nowIso(this.settings.ttlMs)],
      );
      if (!rowCount) return;
      await tx.query('DELETE FROM bulk_export_parts WHERE job_id = $1', [task.jobId]);
      await this.removeFiles(task.jobId);
    });
  }

  /** Gives the task back (this process stops): any process resumes it at once; the claim does not count as an attempt. */
  async release(task: Pick<ClaimedTask, 'jobId' | 'type' | 'leaseToken'>): Promise<void> {
    await this.db.query(
      'UPDATE bulk_export_tasks SET lease_token = NULL, lease_expires_at = NULL, attempts = attempts - 1 WHERE job_id = $1 AND resource_type = $2 AND lease_token = $3',
      [task.jobId, task.type, task.leaseToken],
    );
  }
}
