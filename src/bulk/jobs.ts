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

export type { BulkExportSettings } from '../core/settings';

/** A second export while one is running: 429, retry after this many seconds. */
export const BUSY_RETRY_AFTER_SECONDS = 30;
/** Claims of a task (restarts after a claimer died, or errors) before its export fails visibly. */
export const MAX_ATTEMPTS = 5;
/** NOTIFY channel: an export was queued, workers of every process look now. */
export const BULK_EXPORT_CHANNEL = 'pont_bulk_exports';

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
}

export interface ExportJob {
  id: string;
  status: 'running' | 'completed' | 'failed';
  request: string;
  transactionTime: string;
  error: string | null;
  expiresAt: string | null;
  exported: number;
  types: number;
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
  /** With a replica: the primary's WAL position once the task was claimed (after its kick-off), which the replica must have replayed to serve its pages. */
  primaryPosition?: string;
  /** The primary's clock at primaryPosition: a part read on the replica is as of then (its written_at, for openFile's consent check). */
  primaryPositionAt?: string;
  /** Resources the next page reads (nextPageLimit); partResources until a page is cut by the byte limit. */
  pageLimit?: number;
}

interface JobRow {
  id: string;
  status: ExportJob['status'];
  request: string;
  transaction_time: Date | string;
  error: string | null;
  expires_at: Date | string | null;
  exported: string;
  types: number;
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

/**
 * How many resources the next page of a type reads, from the page just written (`lines` in `bytes`): as many as a
 * file of `partBytes` holds at that size, 10% more so that it still ends on the byte limit, at most `partResources`.
 * Each line read is the stored resource turned into text: a page of large resources (ExplanationOfBenefits, ~6.4 kB)
 * read `partResources` at a time would turn ~8 lines into text for every one the byte limit keeps.
 */
export function nextPageLimit(settings: Pick<BulkExportSettings, 'partResources' | 'partBytes'>, lines: number, bytes: number): number {
  if (lines <= 0 || bytes <= 0) return settings.partResources;
  return Math.max(1, Math.min(settings.partResources, Math.ceil(((settings.partBytes * lines) / bytes) * 1.1)));
}

/**
 * The export jobs, their tasks and files (migration 023): what the routes ask (kick-off, status, files, cancel) and
 * what the worker does (claim a task, write one part at a time, complete, fail, release). Times come from `now`,
 * which tests move.
 */
export class BulkExports {
  constructor(
    private readonly db: Database,
    readonly settings: BulkExportSettings,
    public now: () => number = Date.now,
  ) {}

  private nowIso(plusMs = 0): string {
    return new Date(this.now() + plusMs).toISOString();
  }

  /** Queues an export (a task per type); 429 while the client has one running. Returns the job id. */
  async create(input: NewExport): Promise<{ id: string; transactionTime: string }> {
    const id = randomBytes(16).toString('hex');
    const now = this.nowIso();
    const { tokenId: _token, tokenExpiresAt: _expires, ...principal } = input.principal;
    try {
      await this.db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO bulk_export_jobs (id, client_id, organization_id, principal, request, level, members, since, type_filters, transaction_time, status, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'running', $10)`,
          [id, principal.clientId, principal.organizationId, JSON.stringify(principal), input.request, input.level, input.members ?? null, input.since ?? null,
            input.typeFilters.map((f) => f.text), now],
        );
        await tx.query('INSERT INTO bulk_export_tasks (job_id, resource_type) SELECT $1, unnest($2::text[])', [id, input.types]);
        await tx.query('SELECT pg_notify($1, $2)', [BULK_EXPORT_CHANNEL, id]);
      });
    } catch (err) {
      if (sqlState(err) !== SqlState.uniqueViolation) throw err;
      throw new ApiError(429, ErrorCode.rateLimited, 'This client already has a bulk export in progress: wait for it to finish, or cancel it (DELETE its status URL)', {
        headers: { 'Retry-After': String(BUSY_RETRY_AFTER_SECONDS) },
      });
    }
    return { id, transactionTime: now };
  }

  /** The job, when `owner` asked for it and it has not expired (a cancelled job is deleted). */
  async find(id: string, owner: ExportOwner): Promise<ExportJob | undefined> {
    const { rows } = await this.db.query<JobRow>(
      `SELECT j.id, j.status, j.request, j.transaction_time, j.error, j.expires_at, COALESCE(sum(t.exported), 0)::text AS exported,
              count(t.resource_type)::int AS types, count(t.resource_type) FILTER (WHERE t.done)::int AS types_done
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
   * One file's bytes in chunks of `chunkBytes`, read from the database one chunk at a time (parts are stored
   * uncompressed, so each chunk reads only its own pages): a download holds one chunk in memory, whatever its size.
   * Undefined when `owner` may not have it (another client, not completed, expired, no such part); 'withheld' once a
   * consent of the organisation about a patient in the file changed (withdrawn, narrowed, renewed) or ended after
   * the file was written: what it holds may no longer be the organisation's to read, so it exports again.
   */
  async openFile(id: string, part: number, owner: ExportOwner, chunkBytes = 1024 * 1024): Promise<AsyncIterable<Buffer> | 'withheld' | undefined> {
    const job = await this.find(id, owner);
    if (job?.status !== 'completed') return undefined;
    const withheld = consentChangedSince(sql`${owner.organizationId}`, sql`f.patients`, sql`f.written_at`, sql`${this.nowIso()}::timestamptz`);
    const { text, values } = sql`SELECT length(f.body) AS length, ${withheld} AS withheld FROM bulk_export_parts f WHERE f.job_id = ${id} AND f.part = ${part}`.render();
    const { rows } = await this.db.query<{ length: number; withheld: boolean }>(text, values);
    const length = rows[0]?.length;
    if (length === undefined) return undefined;
    if (rows[0]!.withheld) return 'withheld';
    const db = this.db;
    const chunkSql = 'SELECT substring(body FROM $3 FOR $4) AS bytes FROM bulk_export_parts WHERE job_id = $1 AND part = $2';
    const chunkAt = (from: number): Promise<Uint8Array | undefined> =>
      this.oneChunkAtATime(async () =>
        db.bytes ? db.bytes(chunkSql, [id, part, from, chunkBytes]) : ((await db.query<{ bytes: Uint8Array | null }>(chunkSql, [id, part, from, chunkBytes])).rows[0]?.bytes ?? undefined),
      );
    return (async function* () {
      for (let from = 1; from <= length; from += chunkBytes) {
        // Removed meanwhile (cancelled, expired): the answer ends short rather than mixing files.
        const bytes = await chunkAt(from);
        if (!bytes) return;
        yield Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
    })();
  }

  /** The last chunk read queued by a download of this process. */
  private chunkReads: Promise<unknown> = Promise.resolve();

  /**
   * The chunk reads of every download this process serves, one at a time, in the order asked (downloads take turns):
   * like the writing of files (PONT_BULK_EXPORT_CONCURRENCY), downloads then keep one database statement busy, and
   * other clients' reads the rest of a small machine. Measured with 4 files downloaded at once ("Bulk export:
   * npm run bench:bulk").
   */
  private oneChunkAtATime<T>(read: () => Promise<T>): Promise<T> {
    const turn = this.chunkReads.then(read, read);
    this.chunkReads = turn.catch(() => undefined);
    return turn;
  }

  /** Cancels (running) or deletes (finished) the job, its tasks and files; false when `owner` has no such job. */
  async cancel(id: string, owner: ExportOwner): Promise<boolean> {
    // A worker's step holds its task's row until its part commits: the delete waits for it, and the worker stops.
    const { rowCount } = await this.db.query(
      `DELETE FROM bulk_export_jobs WHERE id = $1 AND client_id = $2 AND organization_id = $3 AND (expires_at IS NULL OR expires_at > $4)`,
      [id, owner.clientId, owner.organizationId, this.nowIso()],
    );
    return rowCount > 0;
  }

  /** Removes the jobs and files whose time is up; returns how many jobs. */
  async purgeExpired(): Promise<number> {
    const { rowCount } = await this.db.query('DELETE FROM bulk_export_jobs WHERE expires_at <= $1', [this.nowIso()]);
    return rowCount;
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
    }>(
      `WITH due AS (
         SELECT t.job_id, t.resource_type FROM bulk_export_tasks t JOIN bulk_export_jobs j ON j.id = t.job_id
         WHERE NOT t.done AND j.status = 'running' AND (t.lease_expires_at IS NULL OR t.lease_expires_at <= $1)
         ORDER BY j.created_at, t.resource_type LIMIT 1
         FOR UPDATE OF t SKIP LOCKED
       )
       UPDATE bulk_export_tasks t SET lease_token = $2, lease_expires_at = $3, attempts = t.attempts + 1
       FROM due, bulk_export_jobs j WHERE t.job_id = due.job_id AND t.resource_type = due.resource_type AND j.id = t.job_id
       RETURNING t.job_id, t.resource_type, t.attempts, j.principal, j.level, j.members, j.since, j.type_filters, j.transaction_time`,
      [this.nowIso(), leaseToken, this.nowIso(this.settings.leaseMs)],
    );
    const r = rows[0];
    if (!r) return undefined;
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
      primaryPosition: position?.lsn,
      primaryPositionAt: position?.at,
    };
  }

  /**
   * Writes the task's next file: the next page of its type that the caller may read (FhirRepository
   * .exportPageQuery), turned into one ndjson part inside the database, and the point to resume from, in one
   * transaction under the lease. 'done': the type is exported; 'lost': the lease is gone (cancelled, or taken over
   * after it ran out), nothing was written.
   */
  async step(task: ClaimedTask, repo: FhirRepository): Promise<'more' | 'done' | 'lost'> {
    return repo.transaction(async (sql) => {
      // work_mem for this transaction: a page of up to partResources lines is aggregated in memory, not in temporary files.
      const { rows } = await sql.query<{ after_rid: string }>(
        `SELECT t.after_rid::text AS after_rid, set_config('work_mem', '64MB', true) FROM bulk_export_tasks t JOIN bulk_export_jobs j ON j.id = t.job_id
         WHERE t.job_id = $1 AND t.resource_type = $2 AND t.lease_token = $3 AND NOT t.done AND j.status = 'running' FOR UPDATE OF t`,
        [task.jobId, task.type, task.leaseToken],
      );
      if (!rows[0]) return 'lost';
      const page: ExportPage = {
        afterRid: rows[0].after_rid,
        limit: task.pageLimit ?? this.settings.partResources,
        until: task.transactionTime,
        since: task.since ?? undefined,
        patients: task.level === 'system' ? undefined : (task.members ?? 'any'),
        typeFilters: typeFilterQueries(task.typeFilters, task.type),
      };
      const query = await repo.exportPageQuery(task.type, page);
      const p = (n: number) => `$${query.values.length + n}`;
      // One pass over the page, aggregated as it streams by (no copy of the page is kept: materialising it cost more
      // than turning the stored JSON into text): the lines up to `partBytes` (at least one) are kept, the running sum
      // going in the index's rid order; with the kept lines' patients as one space-separated list (FHIR ids have no
      // spaces), whose count and first 50 go into the audit record.
      const pageSql = `page AS (
           SELECT string_agg(line, E'\\n') FILTER (WHERE kept) || E'\\n' AS body, count(*) FILTER (WHERE kept)::int AS n,
                  max(rid) FILTER (WHERE kept)::text AS last_rid, count(*)::int AS fetched,
                  string_agg(array_to_string(patients, ' '), ' ') FILTER (WHERE kept) AS patient_list
           FROM (SELECT rid, line, patients, sum(octet_length(line)) OVER (ORDER BY rid ROWS UNBOUNDED PRECEDING) - octet_length(line) < ${p(1)} AS kept
                 FROM (${query.sql}) p) w
         )`;
      const summary = `page.n, page.last_rid, page.fetched, d.*
         FROM page, LATERAL (SELECT count(*)::int AS patients, coalesce(array_agg(x ORDER BY x), '{}') AS ids
               FROM (SELECT DISTINCT x FROM unnest(string_to_array(page.patient_list, ' ')) x WHERE x <> '' AND x <> ${p(2)}) u) d`;
      const values = [...query.values, this.settings.partBytes, UNPLACED_PATIENT];
      // ids: the file's patients, kept with it (a consent change about one of them withholds the file, openFile).
      type Outcome = { part: string | null; n: number; bytes: number | null; last_rid: string | null; fetched: number; patients: number; ids: string[] };
      let r: Outcome;
      // AuditEvents are materialised by exportPageQuery in this transaction: not on any replica yet.
      const replica = task.type === 'AuditEvent' ? undefined : await replicaAt(this.db, task.primaryPosition);
      if (replica) {
        // The page is read on the replica (README "Read replicas"), the part written here, under the lease.
        const { rows: read } = await replica.query<Omit<Outcome, 'part' | 'bytes'> & { body: string | null }>(`WITH ${pageSql} SELECT page.body, ${summary}`, values);
        const { body, ...rest } = read[0]!;
        const { rows: part } = body
          ? await sql.query<{ part: string }>(
              // Written "as of" the replica's position, not now: a consent change since then may be missing from the
              // page, and must withhold the file (openFile) as it would a page read before the change.
              `INSERT INTO bulk_export_parts (job_id, resource_type, count, body, patients, written_at) VALUES ($1, $2, $3, convert_to($4, 'UTF8'), $5, $6::timestamptz) RETURNING part::text AS part`,
              [task.jobId, task.type, rest.n, body, rest.ids, task.primaryPositionAt],
            )
          : { rows: [] };
        r = { ...rest, part: part[0]?.part ?? null, bytes: body ? Buffer.byteLength(body) : null };
      } else {
        // The page becomes the part without leaving the database.
        const { rows: out } = await sql.query<Outcome>(
          `WITH ${pageSql},
           summary AS (SELECT ${summary}),
           part AS (
             INSERT INTO bulk_export_parts (job_id, resource_type, count, body, patients)
             SELECT ${p(3)}, ${p(4)}, page.n, convert_to(page.body, 'UTF8'), summary.ids FROM page, summary WHERE page.n > 0
             RETURNING part, octet_length(body) AS bytes
           )
           SELECT (SELECT part::text FROM part) AS part, (SELECT bytes FROM part) AS bytes, summary.* FROM summary`,
          [...values, task.jobId, task.type],
        );
        r = out[0]!;
      }
      const n = r.n;
      // More of this type: the page was full, or the byte limit cut it.
      const more = n > 0 && (r.fetched === page.limit || n < r.fetched);
      if (more) task.pageLimit = nextPageLimit(this.settings, n, r.bytes ?? 0);
      if (n > 0) {
        const named = r.ids.slice(0, 50);
        await repo.audit({
          operation: 'bulkExport',
          action: 'R',
          outcome: 'success',
          outcomeDescription: `bulk export ${task.jobId}, file ${r.part}: ${n} ${task.type} resource(s) of ${r.patients} patient(s)${r.patients > named.length ? `; first ${named.length} named` : ''}`,
          patient: { id: named[0] },
          otherPatients: named.slice(1),
          dataTypes: [task.type],
        });
      }
      await sql.query(
        `UPDATE bulk_export_tasks SET after_rid = COALESCE($3::bigint, after_rid), exported = exported + $4, done = $5,
           lease_token = CASE WHEN $5 THEN NULL ELSE lease_token END, lease_expires_at = CASE WHEN $5 THEN NULL ELSE $6::timestamptz END
         WHERE job_id = $1 AND resource_type = $2`,
        [task.jobId, task.type, r.last_rid, n, !more, this.nowIso(this.settings.leaseMs)],
      );
      return more ? 'more' : 'done';
    });
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
      if (rowCount) await tx.query('DELETE FROM bulk_export_parts WHERE job_id = $1', [task.jobId]);
    });
  }

  /** Gives the task back (this process stops): any process resumes it at once; the claim does not count as an attempt. */
  async release(task: ClaimedTask): Promise<void> {
    await this.db.query(
      'UPDATE bulk_export_tasks SET lease_token = NULL, lease_expires_at = NULL, attempts = attempts - 1 WHERE job_id = $1 AND resource_type = $2 AND lease_token = $3',
      [task.jobId, task.type, task.leaseToken],
    );
  }
}
