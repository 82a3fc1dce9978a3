import type { Database, Queryable } from '../db/database';
import { monthOf, monthRange, type Month } from '../core/period';

/** The tables partitioned by month (migrations 024, 027), by the timestamp that places a row. */
export const PARTITIONED = {
  audit: { table: 'audit_log', column: 'recorded' },
  events: { table: 'events', column: 'created_at' },
  attempts: { table: 'webhook_delivery_attempts', column: 'started_at' },
} as const;
export type PartitionedTable = (typeof PARTITIONED)[keyof typeof PARTITIONED];

/** Months made ahead of the clock, so that the month turning never sends rows to the default partition. */
const MONTHS_AHEAD = 2;

/**
 * How long a partition change waits for a lock before giving up until the next run. Attaching and detaching lock
 * the whole table: a change queued behind a long transaction would hold up every request that writes an audit row.
 */
const LOCK_TIMEOUT = '2s';

/** Runs partition DDL in one transaction that gives up on a lock it cannot get within LOCK_TIMEOUT. */
function ddl<T>(db: Database, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
    return fn(tx);
  });
}

export const partitionName = (t: PartitionedTable, month: Month) => `${t.table}_p${month.replace('-', '')}`;
const defaultPartition = (t: PartitionedTable) => `${t.table}_default`;
const literal = (at: Date) => `'${at.toISOString()}'`;

export interface MonthPartition {
  month: Month;
  name: string;
  /** False for a partition whose drop was interrupted after it was detached: it is finished by the next run. */
  attached: boolean;
}

/** The month partitions of `t` that exist, attached or not, oldest first. */
export async function monthPartitions(sql: Queryable, t: PartitionedTable): Promise<MonthPartition[]> {
  const { rows } = await sql.query<{ relname: string; attached: boolean }>(
    `SELECT c.relname, EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid) AS attached
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname ~ $1 ORDER BY c.relname`,
    [`^${t.table}_p[0-9]{6}$`],
  );
  return rows.map((r) => {
    const digits = r.relname.slice(-6);
    return { month: `${digits.slice(0, 4)}-${digits.slice(4)}`, name: r.relname, attached: r.attached };
  });
}

/**
 * Makes the partition of `month`, moving its rows out of the default partition (where rows wait while their month
 * has none: before the first start after migration 024, or when no process has run for months). One transaction.
 * The table is locked first, then (LOCK TABLE recurses) its partitions, the default one among them: parent, then
 * partition, the order inserts and DDL take.
 * - Against writers, always: an insert routes its row when it starts, so one that began before the new partition and
 *   waited on the default partition's lock would then break its narrowed constraint ("new row for relation
 *   audit_log_default violates partition constraint": a bundle import failed so when a retention pass ran during it).
 * - Against readers too when rows move (found under the first lock, which holds writers off): a statement whose plan
 *   predates the new partition scans the default one without it, after the move: its rows are in neither (an event
 *   replayed, then not found for its deliveries' listing, in the PHP client's suite; test/retention.test.ts). Waiting
 *   on the table, a reader is planned afresh once the new partition is in. A month made ahead moves nothing, and
 *   readers go on.
 */
async function createPartition(db: Database, t: PartitionedTable, month: Month): Promise<void> {
  const name = partitionName(t, month);
  const { from, to } = monthRange(month);
  const inMonth = `${t.column} >= ${literal(from)} AND ${t.column} < ${literal(to)}`;
  await ddl(db, async (tx) => {
    await tx.query(`LOCK TABLE ${t.table} IN SHARE ROW EXCLUSIVE MODE`);
    if ((await monthPartitions(tx, t)).some((p) => p.name === name)) return; // another process made it meanwhile
    if ((await tx.query(`SELECT 1 FROM ${defaultPartition(t)} WHERE ${inMonth} LIMIT 1`)).rows.length) await tx.query(`LOCK TABLE ${t.table} IN ACCESS EXCLUSIVE MODE`);
    await tx.query(`LOCK TABLE ${defaultPartition(t)} IN ACCESS EXCLUSIVE MODE`);
    await tx.query(`CREATE TABLE ${name} (LIKE ${t.table} INCLUDING DEFAULTS)`);
    await tx.query(`WITH moved AS (DELETE FROM ${defaultPartition(t)} WHERE ${inMonth} RETURNING *) INSERT INTO ${name} SELECT * FROM moved`);
    await tx.query(`ALTER TABLE ${t.table} ATTACH PARTITION ${name} FOR VALUES FROM (${literal(from)}) TO (${literal(to)})`);
  });
}

/**
 * Gives every month that has rows in the default partition, the current month and the next MONTHS_AHEAD months a
 * partition of their own. Returns the months it made.
 */
export async function ensurePartitions(db: Database, t: PartitionedTable, now: Date): Promise<Month[]> {
  const { rows } = await db.query<{ month: Month }>(`SELECT DISTINCT to_char(${t.column} AT TIME ZONE 'UTC', 'YYYY-MM') AS month FROM ${defaultPartition(t)}`);
  const wanted = new Set([...rows.map((r) => r.month), ...Array.from({ length: MONTHS_AHEAD + 1 }, (_, i) => monthOf(now, i))]);
  const existing = new Set((await monthPartitions(db, t)).map((p) => p.month));
  const made: Month[] = [];
  for (const month of [...wanted].sort()) {
    if (existing.has(month)) continue;
    await createPartition(db, t, month);
    made.push(month);
  }
  return made;
}

/**
 * Takes a month partition out of its table: its rows are no longer read or written through the table. `held`, when
 * given, is asked first under the lock the detach takes, so nothing it reads changes before the partition is out:
 * when it answers true the partition stays and this returns false.
 */
export async function detachPartition(db: Database, t: PartitionedTable, p: MonthPartition, held?: (tx: Queryable) => Promise<boolean>): Promise<boolean> {
  if (!p.attached) return true;
  return ddl(db, async (tx) => {
    await tx.query(`LOCK TABLE ${t.table} IN ACCESS EXCLUSIVE MODE`);
    if (await held?.(tx)) return false;
    await tx.query(`ALTER TABLE ${t.table} DETACH PARTITION ${p.name}`);
    return true;
  });
}

/** Drops a month partition (detached first, if it still is attached), unless `held` keeps it (detachPartition). */
export async function dropPartition(db: Database, t: PartitionedTable, p: MonthPartition, held?: (tx: Queryable) => Promise<boolean>): Promise<boolean> {
  if (!(await detachPartition(db, t, p, held))) return false;
  await ddl(db, (tx) => tx.query(`DROP TABLE ${p.name}`));
  return true;
}
