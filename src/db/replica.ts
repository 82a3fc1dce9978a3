import { sqlState, type Database, type ReadDatabase } from './database';
import { replicaFallbacks } from '../metrics';

/**
 * Reads that must answer as the primary would at some moment (docs/operators.md "Read replicas"): the reader notes the
 * primary's WAL position at that moment, and reads the replica only once it has replayed that far (everything
 * committed before, revocations and consent changes included, is then there); until then it reads the primary.
 */

/** The primary's WAL position now; undefined when no replica is configured (nothing to wait for). */
export async function primaryPosition(db: Database): Promise<string | undefined> {
  return (await primaryPositionAt(db))?.lsn;
}

/** primaryPosition, with the primary's clock when it was taken (what a replica read at that position is as of). */
export async function primaryPositionAt(db: Database): Promise<{ lsn: string; at: string } | undefined> {
  if (!db.reader) return undefined;
  const { rows } = await db.query<{ lsn: string; at: string }>(`SELECT pg_current_wal_lsn()::text AS lsn, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`);
  return rows[0]!;
}

/**
 * The replica when it has replayed `position`, else undefined (read the primary). A server that is not in recovery
 * (a promoted replica, or a database standing in for one) has nothing to replay: it is read as it is.
 */
export async function replicaAt(db: Database, position: string | undefined): Promise<ReadDatabase | undefined> {
  if (!db.reader || position === undefined) return undefined;
  const { rows } = await db.reader.query<{ replayed: boolean }>('SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn AS replayed', [position]);
  return rows[0]!.replayed ? db.reader : undefined;
}

/** Node's errors of a connection that could not be made or was lost. */
const CONNECTION_ERRORS = ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE'];

/**
 * An error of the replica rather than of the statement: unreachable or lost (SQLSTATE class 08, Node's connection
 * errors), shutting down or starting (57P01-57P03), or a query cancelled by a conflict with replay (40001).
 */
export function replicaUnavailable(err: unknown): boolean {
  const code = sqlState(err) ?? '';
  return code.startsWith('08') || /^57P0[1-3]$/.test(code) || code === '40001' || CONNECTION_ERRORS.includes(code) || (err instanceof Error && /Connection terminated/.test(err.message));
}

/**
 * The replica's pool, each statement answered by the primary when the replica cannot answer it: a replica down or
 * restarting slows the lag-tolerant routes (the primary answers them) and breaks none. Counted in
 * pont_db_replica_fallbacks_total.
 */
export function replicaOrPrimary(replica: ReadDatabase, primary: Database): ReadDatabase {
  return {
    ...replica,
    async query(sql, params) {
      try {
        return await replica.query(sql, params);
      } catch (err) {
        if (!replicaUnavailable(err)) throw err;
        replicaFallbacks.inc();
        return primary.query(sql, params);
      }
    },
  };
}
