import { AsyncLocalStorage } from 'node:async_hooks';
import type { AuditEvent } from '@medplum/fhirtypes';
import type { Database, Queryable } from '../db/database';
import type { Logger } from '../log';
import type { BackgroundWorker } from '../jobs';
import { writeMany } from './store/writes';
import { auditRow, buildAuditEvent, insertAuditRows, type AuditRecord, type AuditRow } from '../audit/audit';

/** Most rows one group commit inserts; more wait for the next. */
const MAX_GROUP = 500;
/** Rows turned into AuditEvents per transaction. */
const MATERIALIZE_BATCH = 500;
/** Event-loop utilisation above which the background materialiser leaves the process to requests. */
const BUSY = 0.5;
/** ... but takes a batch at least this often. */
const FORCED_EVERY_MS = 10_000;

/**
 * Is a group commit of `rows` an asynchronous commit (insertAuditRows)? On a PostgreSQL server, whose WAL writer
 * flushes it within moments whatever becomes of Pont, yes; unless the group holds a break-glass read, which is
 * rare and is what a review of emergency access reads first: that group waits for the disk. Embedded PGlite is
 * Pont's own process (a crash of Pont is the database's): always synchronous.
 */
export function commitsAsynchronously(backend: Database['backend'], rows: readonly AuditRow[]): boolean {
  return backend === 'postgres' && !rows.some((r) => r.record.breakGlass);
}

/**
 * The audit trail of one process (issue 13). Each access is a compact row of `audit_log`:
 * - outside a write, `append` adds it to the next group commit: concurrent requests share one INSERT, and
 *   each request's promise resolves once the statement holding its row has committed (before the response is
 *   sent; an asynchronous commit on PostgreSQL, see insertAuditRows). A group starts as soon as the previous
 *   one ends, so a lone request waits for no timer;
 * - a write records its row in its own transaction (recordAudit).
 * Readers see the trail as FHIR AuditEvents: rows are materialised into the FHIR store in the background, and
 * before any read of the trail (`catchUp`) every committed row is, so nothing recorded is ever missing from
 * an AuditEvent search.
 */
export class AuditTrail {
  private queue: Array<{ row: AuditRow; done: (err?: unknown) => void }> = [];
  private flushing?: Promise<void>;
  /** Group commits run in a context of their own, never inside a caller's transaction. */
  private readonly detached = AsyncLocalStorage.snapshot();

  constructor(
    private readonly db: Database,
    private readonly baseUrl: () => string,
  ) {}

  /** Records `record` in the next group commit; resolves once it is durable. */
  append(record: AuditRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ row: auditRow(record), done: (err) => (err ? reject(err) : resolve()) });
      this.flushing ??= this.detached(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length) {
        const group = this.queue.splice(0, MAX_GROUP);
        try {
          const rows = group.map((g) => g.row);
          await insertAuditRows(this.db, rows, commitsAsynchronously(this.db.backend, rows));
          for (const g of group) g.done();
        } catch (err) {
          for (const g of group) g.done(err);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /**
   * Turns up to `limit` rows not yet materialised into AuditEvent resources (id = the row's id), in `sql` or a
   * transaction of its own. `wait`: take rows another process is materialising once it has (a reader catching
   * up); otherwise skip them (the background). Returns how many rows it took.
   */
  async materialize(limit: number, wait: boolean, sql?: Queryable): Promise<number> {
    if (!sql) return this.db.transaction((tx) => this.materialize(limit, wait, tx));
    const { rows } = await sql.query<{ id: string; recorded: Date | string; record: AuditRecord }>(
      `SELECT id, recorded, record FROM audit_log WHERE NOT materialized ORDER BY recorded, id LIMIT $1 FOR UPDATE${wait ? '' : ' SKIP LOCKED'}`,
      [limit],
    );
    if (!rows.length) return 0;
    // Built by buildAuditEvent, whose output a test validates against R4: not validated again here.
    const items = rows.map((r) => ({ resource: auditEventOf(r), method: 'POST' as const }));
    // Each AuditEvent is authored by the organisation whose access it records: that organisation reads its own
    // accesses, and only operators read the whole trail (src/policy OWNER_ONLY_TYPES).
    const orgOf = new Map(rows.map((r) => [r.id, organizationOf(r.record)]));
    await writeMany(sql, this.baseUrl(), items, { trusted: true, authorOf: (resource) => orgOf.get(resource.id!) ?? null });
    await sql.query('UPDATE audit_log SET materialized = true WHERE id = ANY($1::uuid[])', [rows.map((r) => r.id)]);
    return rows.length;
  }

  /**
   * Before a read of the trail: this process's pending rows committed, then every committed row materialised (in
   * `sql`, the reader's own transaction, when it has one).
   */
  async catchUp(sql?: Queryable): Promise<void> {
    await this.flushing;
    while ((await this.materialize(MATERIALIZE_BATCH, true, sql)) === MATERIALIZE_BATCH);
  }

  /**
   * Materialises in the background, yielding to requests: every `intervalMs` it takes one batch if the event loop
   * was less than half busy since the last look (requests first), and one every FORCED_EVERY_MS whatever the load,
   * so the backlog a reader may have to catch up on stays bounded.
   */
  worker(intervalMs: number, log: Logger): BackgroundWorker {
    let timer: NodeJS.Timeout | undefined;
    let running: Promise<void> | undefined;
    let stopping = false;
    let lastLook = performance.eventLoopUtilization();
    let lastRun = Date.now();
    const tick = () => {
      const now = performance.eventLoopUtilization();
      const busy = performance.eventLoopUtilization(now, lastLook).utilization > BUSY;
      lastLook = now;
      if (running || (busy && Date.now() - lastRun < FORCED_EVERY_MS)) return;
      running = this.detached(async () => {
        try {
          lastRun = Date.now();
          await this.materialize(MATERIALIZE_BATCH, false);
        } catch (err) {
          if (!stopping) log.error('audit trail not materialised', { error: String(err) });
        } finally {
          running = undefined;
        }
      });
    };
    return {
      name: 'audit-materializer',
      start() {
        timer = setInterval(tick, intervalMs);
        timer.unref();
      },
      stop: async () => {
        stopping = true;
        clearInterval(timer);
        await running;
        await this.flushing;
      },
    };
  }
}

/** A row of `audit_log` as readers see it: the FHIR AuditEvent with the row's id (materialised, and archived). */
export function auditEventOf(row: { id: string; recorded: Date | string; record: AuditRecord }): AuditEvent & { id: string } {
  return { ...buildAuditEvent(row.record, new Date(row.recorded)), id: row.id };
}

/**
 * The organisation of the caller an audit record names (none for Pont itself and for patients). A refusal is the
 * operators' only: it names the patient of data the caller was refused, which the caller must not learn.
 */
export function organizationOf(record: AuditRecord): string | null {
  if (record.outcome !== 'success') return null;
  const principal = record.caller?.principal as { organizationId?: string } | undefined;
  return principal?.organizationId ?? null;
}
